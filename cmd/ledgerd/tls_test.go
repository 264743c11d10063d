package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
)

// issue makes a certificate signed by parent (self-signed when parent is
// nil) and writes it and its key as PEM files named name.crt, name.key.
func issue(t *testing.T, dir, name string, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return cert, key
}

// With client_ca_file, a connection without a client certificate signed by
// that CA is refused during the handshake.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := issue(t, dir, "ca", true, nil, nil)
	issue(t, dir, "server", false, ca, caKey)
	issue(t, dir, "client", false, ca, caKey)
	otherCA, otherKey := issue(t, dir, "other-ca", true, nil, nil)
	issue(t, dir, "stranger", false, otherCA, otherKey)

	s := startServer(t)
	tc := &config.TLSConfig{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"),
		ClientCAFile: filepath.Join(dir, "ca.crt")}
	tlsCfg, err := tc.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer((&server{cfg: s.cfg, l: s.l, log: slog.New(slog.DiscardHandler)}).routes())
	ts.TLS = tlsCfg
	ts.StartTLS()
	defer ts.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	get := func(clientName string) error {
		cfg := &tls.Config{RootCAs: roots}
		if clientName != "" {
			cert, err := tls.LoadX509KeyPair(filepath.Join(dir, clientName+".crt"), filepath.Join(dir, clientName+".key"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get(ts.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("client"); err != nil {
		t.Fatalf("client certificate from the CA: %v", err)
	}
	if err := get(""); err == nil {
		t.Error("no client certificate accepted")
	}
	if err := get("stranger"); err == nil {
		t.Error("client certificate from another CA accepted")
	}
	bad := &config.TLSConfig{CertFile: tc.CertFile, KeyFile: tc.KeyFile, ClientCAFile: tc.KeyFile}
	if _, err := bad.ServerConfig(); err == nil {
		t.Error("a client CA file without certificates accepted")
	}
}

// TestTLSCertificateReload: ledgerd serve with tls, a certificate
// renewed in place and SIGHUP: new connections get the new certificate.
// A pair that does not load refuses the reload, and the certificate in
// force stays.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := issue(t, dir, "ca", true, nil, nil)
	first, _ := issue(t, dir, "server", false, ca, caKey)
	path, _, err := initDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &raw)
	raw["listen"] = "127.0.0.1:0"
	raw["tls"] = map[string]any{"cert_file": filepath.Join(dir, "server.crt"), "key_file": filepath.Join(dir, "server.key")}
	b, _ = json.Marshal(raw)
	os.WriteFile(path, b, 0o600)
	s := startServing(t, "--config", path)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	served := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "https://"), &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := served(); got.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("served serial %v, want %v", got, first.SerialNumber)
	}
	self, _ := os.FindProcess(os.Getpid())
	second, _ := issue(t, dir, "server", false, ca, caKey)
	self.Signal(syscall.SIGHUP)
	waitFor(t, "the reload", func() bool { return strings.Contains(s.stderr.String(), "TLS certificate in force") })
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after the reload: serial %v, want the renewed %v", got, second.SerialNumber)
	}
	os.WriteFile(filepath.Join(dir, "server.key"), []byte("not a key"), 0o600)
	self.Signal(syscall.SIGHUP)
	waitFor(t, "the refusal", func() bool { return strings.Contains(s.stderr.String(), "config reload refused") })
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after a refused reload: serial %v, want %v", got, second.SerialNumber)
	}
	if line := logLine(s.stderr.String(), "config reload refused"); !strings.Contains(line, "tls") {
		t.Errorf("the refusal: %q", line)
	}
}
