package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonCatalogUnreviewed runs the real ledgerd with a catalog holding
// an MCP tool's declaration (a '-' in its action, a tool pin, a json
// payload field): once reviewed it is served and appended to. A draft
// still marked "reviewed": false that joins the directory does not enter
// on SIGHUP (the catalog is read at start only), and the next start
// refuses it: exit 1, naming the file and the member.
func TestDaemonCatalogUnreviewed(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	d := startDaemon(t, bin, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}

	// The drafts DraftFromInputSchema wrote for server-everything's
	// get-sum and echo (commit/declare's golden files).
	drafts := filepath.Join("..", "..", "commit", "declare", "testdata", "mcp", "drafts")
	sumDraft, err := os.ReadFile(filepath.Join(drafts, "everything.get-sum.json"))
	if err != nil {
		t.Fatal(err)
	}
	echoDraft, err := os.ReadFile(filepath.Join(drafts, "everything.echo.json"))
	if err != nil {
		t.Fatal(err)
	}
	reviewed := strings.Replace(string(sumDraft), "  \"reviewed\": false,\n", "", 1)
	if reviewed == string(sumDraft) {
		t.Fatal("the draft has no reviewed member")
	}
	catalogDir := t.TempDir()
	os.WriteFile(filepath.Join(catalogDir, "get-sum.json"), []byte(reviewed), 0o600)
	setConfig(t, dir, map[string]any{"catalog_dir": catalogDir})

	d = startDaemon(t, bin, dir)
	url := "http://" + d.addr
	if status, b := apitest.GetBody(t, url+"/v1/actions/everything.get-sum"); status != http.StatusOK || string(b) != reviewed {
		t.Fatalf("GET /v1/actions/everything.get-sum: %d %s", status, b)
	}
	decl, err := declare.Parse([]byte(reviewed))
	if err != nil {
		t.Fatal(err)
	}
	res, err := decl.Minimize([]byte(`{"a":2,"b":{"any":["json"]}}`), declare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendRequestBody("everything.get-sum", res, "")))
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("append of everything.get-sum: %d", resp.StatusCode)
	}

	// An unreviewed draft joins the directory: SIGHUP does not read the
	// catalog again, so it is not served.
	os.WriteFile(filepath.Join(catalogDir, "echo.json"), echoDraft, 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	apitest.WaitFor(t, "the reload", func() bool {
		_, b := apitest.GetBody(t, url+"/metrics")
		return strings.Contains(string(b), `ledgerd_config_reloads_total{result="ok"} 1`+"\n")
	})
	if status, _ := apitest.GetBody(t, url+"/v1/actions/everything.echo"); status != http.StatusNotFound {
		t.Errorf("the unreviewed draft after SIGHUP: %d, want 404", status)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("ledgerd stopped: %v\n%s", err, d.stderr.String())
	}

	// The next start refuses it. (A start that serves instead is stopped
	// after a generous bound, and fails the test.)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 ||
		!strings.Contains(string(out), filepath.Join(catalogDir, "echo.json")+": declare: action everything.echo: /reviewed: an unreviewed draft") {
		t.Errorf("a start with an unreviewed declaration: %v, want exit 1 naming echo.json and /reviewed\n%s", err, out)
	}
}
