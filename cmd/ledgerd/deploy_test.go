package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
)

// writeSelfSigned writes a self-signed certificate for ledger.example.com
// and its key, as PEM files.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ledger.example.com"},
		DNSNames:  []string{"ledger.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// jsonNames returns the json names of a struct type's fields.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		names = append(names, f.Tag.Get("json"))
	}
	return names
}

// deploy/ledgerd.json shows every field, and ledgerd accepts it, with its
// files where it names them (/etc/ledgerd moved under a test directory).
func TestSampleConfig(t *testing.T) {
	text, err := os.ReadFile("../../deploy/ledgerd.json")
	if err != nil {
		t.Fatal(err)
	}
	var sample struct {
		Config    map[string]json.RawMessage
		TLS       map[string]json.RawMessage `json:"tls"`
		Mediators []map[string]json.RawMessage
		Witnesses []map[string]json.RawMessage
	}
	if err := json.Unmarshal(text, &sample.Config); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(sample.Config["tls"], &sample.TLS)
	json.Unmarshal(sample.Config["mediators"], &sample.Mediators)
	json.Unmarshal(sample.Config["witnesses"], &sample.Witnesses)
	if len(sample.Witnesses) == 0 {
		t.Fatal("deploy/ledgerd.json lists no witness")
	}
	for _, c := range []struct {
		what    string
		members map[string]json.RawMessage
		typ     reflect.Type
	}{{"the config", sample.Config, reflect.TypeFor[config.Config]()}, {"tls", sample.TLS, reflect.TypeFor[config.TLSConfig]()}, {"mediators[0]", sample.Mediators[0], reflect.TypeFor[config.Mediator]()}, {"witnesses[0]", sample.Witnesses[0], reflect.TypeFor[config.WitnessConfig]()}} {
		for _, name := range jsonNames(c.typ) {
			if _, ok := c.members[name]; !ok {
				t.Errorf("deploy/ledgerd.json: %s lacks %s", c.what, name)
			}
		}
	}

	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{"store", "etc/tls", "etc/declarations", "etc/policies"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	writeSelfSigned(t, filepath.Join(etc, "tls", "cert.pem"), filepath.Join(etc, "tls", "key.pem"))
	decls, _ := filepath.Glob("../../testdata/declarations/*.json")
	for _, d := range decls {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "declarations", filepath.Base(d)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	policies, _ := filepath.Glob("../../testdata/policies/*.cedar")
	for _, p := range policies {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "policies", filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), "/etc/ledgerd", etc)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName}); err != nil {
		t.Error(err)
	}
	cat, err := catalog.Load(cfg.CatalogDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(cfg.PolicyDir, cat.Declarations()); err != nil {
		t.Error(err)
	}
}

// systemd-analyze verify accepts deploy/ledgerd.service without a
// warning (it warns of an unknown or misspelt option but still exits 0),
// and systemd-analyze security rates its exposure 2.0 or less (of 10).
// ExecStart's binary, which verify requires, is a stand-in.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
	}
	unit, err := os.ReadFile("../../deploy/ledgerd.service")
	if err != nil {
		t.Fatal(err)
	}
	const execStart = "ExecStart=/usr/local/bin/ledgerd serve --config /var/lib/ledgerd/ledgerd.json\n"
	if !strings.Contains(string(unit), execStart) {
		t.Fatalf("deploy/ledgerd.service lacks %q", execStart)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ledgerd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledgerd.service")
	if err := os.WriteFile(path, []byte(strings.Replace(string(unit), "/usr/local/bin/ledgerd", bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", path)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "--offline") || strings.Contains(string(out), "--threshold") {
			t.Skipf("this systemd-analyze cannot rate a unit file offline: %s", out)
		}
		t.Fatalf("systemd-analyze security: %v (an exposure above 2.0?)\n%s", err, out)
	}
}
