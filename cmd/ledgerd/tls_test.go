package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestTLSCertificateReload: ledgerd serve with tls, a certificate
// renewed in place and SIGHUP: new connections get the new certificate.
// A pair that does not load refuses the reload, and the certificate in
// force stays.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := apitest.Issue(t, dir, "ca", true, nil, nil)
	first, _ := apitest.Issue(t, dir, "server", false, ca, caKey)
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
	second, _ := apitest.Issue(t, dir, "server", false, ca, caKey)
	self.Signal(syscall.SIGHUP)
	apitest.WaitFor(t, "the reload", func() bool { return strings.Contains(s.stderr.String(), "TLS certificate in force") })
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after the reload: serial %v, want the renewed %v", got, second.SerialNumber)
	}
	os.WriteFile(filepath.Join(dir, "server.key"), []byte("not a key"), 0o600)
	self.Signal(syscall.SIGHUP)
	apitest.WaitFor(t, "the refusal", func() bool { return strings.Contains(s.stderr.String(), "config reload refused") })
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after a refused reload: serial %v, want %v", got, second.SerialNumber)
	}
	if line := logLine(s.stderr.String(), "config reload refused"); !strings.Contains(line, "tls") {
		t.Errorf("the refusal: %q", line)
	}
}
