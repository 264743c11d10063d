package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	f := apitest.NewClusterFixture(t)
	a := startInstance(t, f.Config(t, "a", "1s"))
	apitest.WaitFor(t, "a to sequence", func() bool { code, _ := apitest.Readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
	b, bURL, bLog := testNode(t, f, "b", "1s")
	apitest.WaitFor(t, "b to follow a", func() bool { code, _ := apitest.Readyz(t, bURL+"/readyz"); return code == 200 })
	bPath := filepath.Join(f.Dir, "b", apitest.ConfigName)
	start, err := config.Load(bPath)
	if err != nil {
		t.Fatal(err)
	}
	b.reloader = &configReloader{path: bPath, start: start, creds: b.creds, log: b.log, m: b.m}
	if code := apitest.AppendWith(t, bURL, f.Token, 1); code != http.StatusCreated {
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
	if err := b.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bLog.String(), "config reloaded") {
		t.Fatalf("b did not reload: %s", bLog)
	}
	if code := apitest.AppendWith(t, bURL, f.Token, 2); code != http.StatusUnauthorized {
		t.Errorf("the rotated token at b after b's reload: %d, want 401", code)
	}
	if code := apitest.AppendWith(t, a.url, f.Token, 3); code != http.StatusCreated {
		t.Errorf("the rotated token at a, not signalled: %d, want 201", code)
	}
	if code := apitest.AppendWith(t, bURL, rotated, 4); code != http.StatusUnauthorized {
		t.Errorf("the new token through b before a's reload: %d, want 401 (a's answer)", code)
	}
	rotate(filepath.Join(f.Dir, "a", apitest.ConfigName))
	if err := a.d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.logs.String(), "config reloaded") {
		t.Fatalf("a did not reload: %s", a.logs)
	}
	if code := apitest.AppendWith(t, bURL, rotated, 5); code != http.StatusCreated {
		t.Errorf("the new token through b after both reloads: %d, want 201", code)
	}
	if code := apitest.AppendWith(t, a.url, f.Token, 6); code != http.StatusUnauthorized {
		t.Errorf("the rotated token at a after its reload: %d, want 401", code)
	}
}
