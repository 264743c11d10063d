package server

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// With client_ca_file, a connection without a client certificate signed by
// that CA is refused during the handshake.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := apitest.Issue(t, dir, "ca", true, nil, nil)
	apitest.Issue(t, dir, "server", false, ca, caKey)
	apitest.Issue(t, dir, "client", false, ca, caKey)
	otherCA, otherKey := apitest.Issue(t, dir, "other-ca", true, nil, nil)
	apitest.Issue(t, dir, "stranger", false, otherCA, otherKey)

	s := startServer(t)
	tc := &config.TLSConfig{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"),
		ClientCAFile: filepath.Join(dir, "ca.crt")}
	tlsCfg, err := tc.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(newServer(t, s.cfg, s.l, slog.New(slog.DiscardHandler), nil).Handler())
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
