package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// TestClusterReload: a follower checks tokens with its own credentials
// before forwarding. A token rotated in the follower's config is refused
// there from its reload on, while the sequencer, not signalled, still
// takes it; the new token, forwarded, is the sequencer's to accept, from
// its own reload on: every instance needs the signal.
func TestClusterReload(t *testing.T) {
	f := newClusterFixture(t)
	a := startServing(t, "--config", f.config(t, "a", "1s"))
	apitest.WaitFor(t, "a to sequence", func() bool { code, _ := readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
	b, bURL, bLog := f.testNode(t, "b", "1s")
	apitest.WaitFor(t, "b to follow a", func() bool { code, _ := readyz(t, bURL+"/readyz"); return code == 200 })
	bPath := filepath.Join(f.dir, "b", configName)
	start, err := config.Load(bPath)
	if err != nil {
		t.Fatal(err)
	}
	b.reloader = &configReloader{path: bPath, start: start, creds: b.creds, log: b.log, m: b.m}
	if code := apitest.AppendWith(t, bURL, f.token, 1); code != http.StatusCreated {
		t.Fatalf("append through b: %d", code)
	}
	const rotated = "reload-cluster-token-example"
	rotate := func(path string) {
		var c map[string]any
		b, _ := os.ReadFile(path)
		json.Unmarshal(b, &c)
		c["mediators"].([]any)[0].(map[string]any)["token_sha256"] = apitest.TokenHash(rotated)
		b, _ = json.Marshal(c)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rotate(bPath)
	b.reload(t.Context())
	if !strings.Contains(bLog.String(), "config reloaded") {
		t.Fatalf("b did not reload: %s", bLog)
	}
	if code := apitest.AppendWith(t, bURL, f.token, 2); code != http.StatusUnauthorized {
		t.Errorf("the rotated token at b after b's reload: %d, want 401", code)
	}
	if code := apitest.AppendWith(t, a.url, f.token, 3); code != http.StatusCreated {
		t.Errorf("the rotated token at a, not signalled: %d, want 201", code)
	}
	if code := apitest.AppendWith(t, bURL, rotated, 4); code != http.StatusUnauthorized {
		t.Errorf("the new token through b before a's reload: %d, want 401 (a's answer)", code)
	}
	rotate(filepath.Join(f.dir, "a", configName))
	self, _ := os.FindProcess(os.Getpid())
	if err := self.Signal(syscall.SIGHUP); err != nil { // a's serve catches it
		t.Fatal(err)
	}
	apitest.WaitFor(t, "a's reload", func() bool { return strings.Contains(a.stderr.String(), "config reloaded") })
	if code := apitest.AppendWith(t, bURL, rotated, 5); code != http.StatusCreated {
		t.Errorf("the new token through b after both reloads: %d, want 201", code)
	}
	if code := apitest.AppendWith(t, a.url, f.token, 6); code != http.StatusUnauthorized {
		t.Errorf("the rotated token at a after its reload: %d, want 401", code)
	}
}
