package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// serve sets the garbage collector's target to 400 % unless GOGC is set,
// and its first log line says which is in force.
func TestGatewayGCPercent(t *testing.T) {
	t.Parallel()
	binaries(t)
	_, vkey, err := note.GenerateKey(rand.Reader, "ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on port 1: the gateway starts without its ledger
	// and its upstream, which it reaches only when called.
	l := &ledger{url: "http://127.0.0.1:1", token: strings.Repeat("cd", 32), vkey: vkey}
	catalog := t.TempDir()
	cfg, _ := writeGatewayConfig(t, l, catalog, map[string]any{"bench": map[string]any{"url": "http://127.0.0.1:1/mcp"}}, nil)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	for _, tc := range []struct {
		gogc string
		want float64
	}{{"", 400}, {"GOGC=", 400}, {"GOGC=150", 150}, {"GOGC=off", -1}} {
		e := env
		if tc.gogc != "" {
			e = append(env[:len(env):len(env)], tc.gogc)
		}
		p, _ := startEnv(t, e, nil, "ledger-mcp: serving on ", bins.ledgerMCP, "serve", "--config", cfg, "--http", "--listen", "127.0.0.1:0")
		p.stop(t)
		var first map[string]any
		lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
		if len(lines) == 0 || json.Unmarshal([]byte(lines[0]), &first) != nil {
			t.Fatalf("%q: no JSON log line first:\n%s", tc.gogc, p.stderr)
		}
		if got, ok := first["go_gc_percent"].(float64); !ok || got != tc.want {
			t.Errorf("%q: first log line %s, want go_gc_percent %v", tc.gogc, lines[0], tc.want)
		}
	}
}
