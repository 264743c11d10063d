package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestTLSCertificateReload: a daemon with tls, a certificate renewed in
// place and a reload (ledgerd's SIGHUP): new connections get the new
// certificate.
// A pair that does not load refuses the reload, and the certificate in
// force stays.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := apitest.Issue(t, dir, "ca", true, nil, nil)
	first, _ := apitest.Issue(t, dir, "server", false, ca, caKey)
	path, _ := apitest.DataDir(t, t.TempDir())
	var raw map[string]any
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &raw)
	raw["listen"] = "127.0.0.1:0"
	raw["tls"] = map[string]any{"cert_file": filepath.Join(dir, "server.crt"), "key_file": filepath.Join(dir, "server.key")}
	b, _ = json.Marshal(raw)
	os.WriteFile(path, b, 0o600)
	s := startInstance(t, path)
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
	second, _ := apitest.Issue(t, dir, "server", false, ca, caKey)
	if err := s.d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), "TLS certificate in force") {
		t.Fatalf("the reload: %s", s.logs)
	}
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after the reload: serial %v, want the renewed %v", got, second.SerialNumber)
	}
	os.WriteFile(filepath.Join(dir, "server.key"), []byte("not a key"), 0o600)
	if err := s.d.Reload(t.Context()); err == nil || !strings.Contains(s.logs.String(), "config reload refused") {
		t.Fatalf("the refusal: %v %s", err, s.logs)
	}
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after a refused reload: serial %v, want %v", got, second.SerialNumber)
	}
	if line := apitest.LogRecord(t, s.logs, "config reload refused; the credentials in force stay"); !strings.Contains(fmt.Sprint(line["error"]), "tls") {
		t.Errorf("the refusal: %v", line)
	}
}
