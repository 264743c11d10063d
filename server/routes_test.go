package server

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/server/approverpage"
	"github.com/decisionledger/ledger/server/metrics"
)

// openRoutes are the only routes anyone may call whatever the config.
var openRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// Every route in the table is wrapped in a guard: mediatorAuth or
// readAuth, or open for health, readiness and metrics alone.
func TestRouteGuards(t *testing.T) {
	s := &Server{tilesPrefix: "/log", m: metrics.New()}
	seen := map[string]bool{}
	for _, rt := range s.routeTable() {
		if seen[rt.pattern] {
			t.Errorf("%s: listed twice", rt.pattern)
		}
		seen[rt.pattern] = true
		switch rt.handler.(type) {
		case mediatorGuard, readGuard, approverpage.Guard:
			if openRoutes[rt.pattern] {
				t.Errorf("%s: guarded, but it must stay open", rt.pattern)
			}
		case open:
			if !openRoutes[rt.pattern] {
				t.Errorf("%s: open to anyone; wrap it in readAuth or mediatorAuth", rt.pattern)
			}
		default:
			t.Errorf("%s: %T is no guard; wrap it in readAuth, mediatorAuth, approverAuth (the approver's page) or (health and metrics only) open", rt.pattern, rt.handler)
		}
	}
	for p := range openRoutes {
		if !seen[p] {
			t.Errorf("%s: not in the route table", p)
		}
	}
}

// concretePath is a request path that pattern's route serves.
func concretePath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	r := strings.NewReplacer("{index}", "0", "{action}", "send_email", "{path...}", "0/000.p/1", "{digest}", "sha256:"+strings.Repeat("0", 64))
	return method, r.Replace(path)
}

// With reads protected, every route but the open ones answers a request
// without credentials 401 unauthenticated, in JSON.
func TestRoutesRefuseWithoutToken(t *testing.T) {
	sum := sha256.Sum256([]byte("reader-token"))
	s := startServerWith(t, func(c *config.Config) {
		c.ReaderTokensSHA256 = []string{fmt.Sprintf("%x", sum)}
		c.CatalogDir = apitest.CorpusDir
	})
	for _, rt := range (&Server{tilesPrefix: s.cfg.TilesPrefix, m: metrics.New()}).routeTable() {
		if _, page := rt.handler.(approverpage.Guard); page {
			continue // the approver's page takes no token (TestPageRefusals)
		}
		method, path := concretePath(rt.pattern)
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error apiError }
		json.Unmarshal(b, &e)
		switch {
		case openRoutes[rt.pattern] && resp.StatusCode == http.StatusUnauthorized:
			t.Errorf("%s %s: 401, but it is open", method, path)
		case !openRoutes[rt.pattern] && (resp.StatusCode != http.StatusUnauthorized || e.Error.Code != "unauthenticated"):
			t.Errorf("%s %s without a token: %d %s, want 401 unauthenticated", method, path, resp.StatusCode, b)
		}
	}
}

// What no route serves gets a JSON error like every other: 404 not_found,
// or 405 method_not_allowed with Allow when another method is served at
// that path. ServeMux's own answers are plain text.
func TestUnroutedJSON(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.TilesPrefix = "/log" })
	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/", 404, "not_found", ""},
		{"GET", "/v1/nothing-here", 404, "not_found", ""},
		{"GET", "/tile/0/000", 404, "not_found", ""}, // tiles are under /log
		{"POST", "/v1/nothing-here", 404, "not_found", ""},
		{"GET", "/v1/entries", 405, "method_not_allowed", "POST"},
		{"DELETE", "/v1/entries/5", 405, "method_not_allowed", "GET, HEAD"},
		{"POST", "/v1/checkpoint", 405, "method_not_allowed", "GET, HEAD"},
		{"PUT", "/healthz", 405, "method_not_allowed", "GET, HEAD"},
		{"POST", "/log/tile/0/000", 405, "method_not_allowed", "GET, HEAD"},
		{"OPTIONS", "/metrics", 405, "method_not_allowed", "GET, HEAD"},
	} {
		req, _ := http.NewRequest(c.method, s.url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error apiError }
		if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != c.status || e.Error.Code != c.code ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %q Allow %q %s; want %d %s Allow %q", c.method, c.path, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), b, c.status, c.code, c.allow)
		}
	}
	// HEAD of a GET route is served, not refused.
	if resp, err := http.Head(s.url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /healthz: %v %v", err, resp.Status)
	}
}
