package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"

	"github.com/decisionledger/ledger/internal/npmtest"
)

// findChromium returns the path of a Chromium to drive, or skips the test
// without one; under LEDGER_CI=1 (.ci/run) it fails instead (as
// cmd/ledgerd's browser test does).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	const how = "no chromium or chromium-browser on PATH: apt-get install chromium, or run bash .ci/run"
	if os.Getenv("LEDGER_CI") == "1" {
		t.Fatal(how + " (LEDGER_CI=1: the browser test must run)")
	}
	t.Skip(how)
	return ""
}

// approveInChromium signs in as alice in a headless Chromium, opens
// approval id on ledgerd's page, checks that it shows the tool and is
// pending, and approves it with the confirmation, as a person would.
func approveInChromium(t *testing.T, chromium string, l *ledger, id, tool string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1200, 900), chromedp.WSURLReadTimeout(2*time.Minute))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatalf("starting %s: %v", chromium, err)
	}
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.Status != 200 {
			t.Fatalf("%s: %d %s", what, resp.Status, resp.StatusText)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return s
	}
	step("the sign-in form", chromedp.Navigate(l.url+"/approvals/"))
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("name"), approverName),
		chromedp.SendKeys(chromedp.ID("password"), approverPassword),
	); err != nil {
		t.Fatal(err)
	}
	step("sign-in", chromedp.Click(chromedp.CSS("#sign-in button")))
	step("the approval", chromedp.Navigate(l.url+"/approvals/"+id))
	if got := text("#state"); got != "pending" {
		t.Fatalf("the approval's state on the page: %q", got)
	}
	if pre := text("#preview"); !strings.Contains(pre, tool) {
		t.Fatalf("the preview does not name %s:\n%s", tool, pre)
	}
	step("approve", chromedp.Click(chromedp.ID("approve")))
	step("confirm", chromedp.Click(chromedp.ID("confirm")))
	if got := text("#state"); got != "approved" {
		t.Fatalf("after the confirmation the state is %q", got)
	}
	if v := text("#verdict"); !strings.Contains(v, "approve by "+approverName) {
		t.Fatalf("the verdict shown: %q", v)
	}
}

// fsServerCommand is server-filesystem from the pinned npm set, run by
// the pinned Node, with roots as its allowed directories: the command of
// a gateway's upstream.
func fsServerCommand(t *testing.T, roots ...string) []string {
	t.Helper()
	return append([]string{npmtest.Node(t), npmtest.Bin(t, "mcp-server-filesystem")}, roots...)
}

// fsRoots makes two directories under a fresh temporary directory,
// symbolic links resolved (the server canonicalizes its roots; the
// policy must name them the same way): "allowed", the allowed directory,
// and "allowed-evil", a sibling whose name starts with it.
func fsRoots(t *testing.T) (allowed, evil string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	allowed, evil = filepath.Join(root, "allowed"), filepath.Join(root, "allowed-evil")
	for _, d := range []string{allowed, evil} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if strings.ContainsAny(allowed, `*"\`) {
		t.Fatalf("%s holds a character the policies would have to escape", allowed)
	}
	return allowed, evil
}

// examplePolicies copies examples/mcp/policies with the allowed directory
// changed to allowed, as the README says to adapt them.
func examplePolicies(t *testing.T, allowed string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "policies")
	files, _ := filepath.Glob(filepath.Join(exampleDir, "policies", "*.cedar"))
	if len(files) == 0 {
		t.Fatal("no policies in examples/mcp/policies")
	}
	os.MkdirAll(dir, 0o755)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(exampleRoot), []byte(allowed))
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// exampleGatewayConfig writes examples/mcp/gateway.json adapted as the
// README says: the ledger's URL, token and key, the catalog's directory,
// the allowed directory in allowlists.fs_roots, the server's command; one
// agent, whose token it returns. With l nil, the ledger is one that is
// not running (enough for ledger-mcp check).
func exampleGatewayConfig(t *testing.T, l *ledger, allowed string, command []string, wait string) (path, agentToken string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleDir, "gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	url, token, vkey := "http://127.0.0.1:9", "not-a-token", ""
	if l != nil {
		url, token, vkey = l.url, l.token, l.vkey
	} else {
		_, vkey, err = note.GenerateKey(rand.Reader, "ledger.example.com/log")
		if err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "ledger.token"), []byte(token+"\n"), 0o600)
	catalog, err := filepath.Abs(filepath.Join(exampleDir, "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	agentToken = strings.Repeat("cd", 32)
	sum := sha256.Sum256([]byte(agentToken))
	cfg["ledger"] = map[string]any{"url": url, "token_file": "ledger.token", "verifier_key": vkey}
	cfg["declarations_dir"] = catalog
	cfg["allowlists"] = map[string]any{"fs_roots": []string{allowed}}
	fsCfg := cfg["servers"].(map[string]any)["fs"].(map[string]any)
	fsCfg["command"] = command
	http := cfg["http"].(map[string]any)
	delete(http, "listen")
	http["agents"] = []any{map[string]any{"principal": "agent:files-bot", "token_sha256": hex.EncodeToString(sum[:])}}
	cfg["approvals"] = map[string]any{"wait": wait}
	cfg["call_timeout"] = "20s"
	b, _ = json.MarshalIndent(cfg, "", "  ")
	path = filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, agentToken
}

// The catalog's pins are server-filesystem 2026.8.31's definitions:
// ledger-mcp check, in front of the pinned server, exposes every tool and
// exits 0. When a pin no longer matches (here, one changed by hand; for
// real, a new version of the package), check names the tool and exits 1.
func TestExampleCatalogPinned(t *testing.T) {
	t.Parallel() // its own directories and server
	binaries(t)
	allowed, _ := fsRoots(t)
	cfg, _ := exampleGatewayConfig(t, nil, allowed, fsServerCommand(t, allowed), "1s")
	out, err := exec.Command(bins.ledgerMCP, "check", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("ledger-mcp check: %v\n%s", err, out)
	}
	var exposed []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct{ Name, Status string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("check printed %q", line)
		}
		if r.Status != "exposed" {
			t.Errorf("%s: %s", r.Name, line)
		}
		exposed = append(exposed, strings.TrimPrefix(r.Name, "fs."))
	}
	if !slices.Equal(exposed, exampleTools) {
		t.Errorf("check lists %v, want %v", exposed, exampleTools)
	}

	// One pin changed: that tool is pin_mismatch, and check fails.
	catalog := filepath.Join(t.TempDir(), "declarations")
	os.MkdirAll(catalog, 0o755)
	files, _ := filepath.Glob(filepath.Join(exampleDir, "declarations", "*.json"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if filepath.Base(f) == "fs.write_file.json" {
			var m map[string]any
			json.Unmarshal(b, &m)
			m["tool"].(map[string]any)["definition_digest"] = "sha256:" + strings.Repeat("1", 64)
			b, _ = json.Marshal(m)
		}
		os.WriteFile(filepath.Join(catalog, filepath.Base(f)), b, 0o644)
	}
	var m map[string]any
	b, _ := os.ReadFile(cfg)
	json.Unmarshal(b, &m)
	m["declarations_dir"] = catalog
	b, _ = json.Marshal(m)
	os.WriteFile(cfg, b, 0o600)
	out, err = exec.Command(bins.ledgerMCP, "check", "--config", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("check with a changed pin: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), `{"name":"fs.write_file","status":"pin_mismatch"`) {
		t.Fatalf("check with a changed pin:\n%s", out)
	}
}

// inspectorCall calls tool through the gateway's HTTP endpoint with
// inspector-cli, with the agent's bearer token, and returns the text of
// its result and isError.
func inspectorCall(t *testing.T, g *gateway, tool string, args ...string) (string, bool) {
	t.Helper()
	argv := []string{g.url, "--transport", "http", "--header", "Authorization: Bearer " + g.token,
		"--method", "tools/call", "--tool-name", tool}
	if len(args) > 0 {
		argv = append(argv, append([]string{"--tool-arg"}, args...)...)
	}
	out, err := npmtest.Inspector(t, argv...)
	if err != nil {
		t.Fatalf("inspector-cli tools/call %s: %v\n%s", tool, err, out)
	}
	var res struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("inspector-cli printed %q: %v", out, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String(), res.IsError
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// server-filesystem 2026.8.31 behind the gateway, through the binaries,
// with the reference catalog and policies of examples/mcp, the allowed
// directory a temporary one and, beside it, a second root of the server
// whose name starts with the allowed one's ("allowed-evil"): the server
// would write there, the policies never let it. Two agents: the Go SDK
// client and inspector-cli, both over the gateway's HTTP with a bearer
// token. One ledgerd and one gateway serve every scenario, in order;
// each is checked in the exported log with ledger-verify export,
// decisions and approvals, and at the end nothing of the files' names or
// contents is in a ledger byte or a log line.
func TestFilesystem(t *testing.T) {
	t.Parallel() // its own ledgerd, gateway, server and directories
	binaries(t)
	chromium := findChromium(t)
	began := time.Now()
	allowed, evil := fsRoots(t)
	catalog, err := filepath.Abs(filepath.Join(exampleDir, "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	policies := examplePolicies(t, allowed)
	l := startLedger(t, catalog, policies)
	cfg, token := exampleGatewayConfig(t, l, allowed, fsServerCommand(t, allowed, evil), "1s")
	g := startGateway(t, cfg, token)
	// A client without URL elicitation: a call needing approval waits
	// (1 s here), then is refused naming the approval and its page.
	agent := g.agent(t, nil)

	// What the scenarios write: names and contents that must never reach
	// the ledger or a log.
	const (
		secret      = "fs-e2e quarterly figures: 4711 EUR to payee-0042"
		inspSecret  = "fs-e2e inspector note: meet at the harbour office"
		reportName  = "q3-report-7c1e.txt"
		deniedName  = "q3-copy-9d2f.txt"
		movedName   = "q3-final-5b8a.txt"
		otherName   = "q3-other-3e6c.txt"
		inspName    = "insp-note-1f4d.txt"
		inspDenied  = "insp-denied-8a2b.txt"
		downName    = "down-write-6c3e.txt"
		downDirName = "down-dir-2d7f"
	)
	raws := []string{secret, inspSecret, reportName, deniedName, movedName, otherName, inspName, inspDenied, downName, downDirName,
		"payee-0042", "harbour office"}
	report := filepath.Join(allowed, reportName)
	var writeIndex float64 = -1

	t.Run("tools", func(t *testing.T) {
		names := toolNames(t, agent)
		slices.Sort(names)
		var want []string
		for _, tool := range exampleTools {
			want = append(want, "fs."+tool)
		}
		if !slices.Equal(names, want) {
			t.Fatalf("tools/list: %v, want %v", names, want)
		}
		// The gateway offers its upstream no roots capability, so the
		// server keeps the roots of its command line (README.md).
		b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "fs.stderr"))
		if err != nil || !bytes.Contains(b, []byte("Client does not support MCP Roots, using allowed directories set from server args")) {
			t.Fatalf("the server's stderr (%v):\n%s", err, b)
		}
	})

	t.Run("allowed write", func(t *testing.T) {
		if text, isErr := callText(t, agent, "fs.write_file", map[string]any{"path": report, "content": secret}); isErr {
			t.Fatalf("allowed write refused: %s\n%s", text, g.stderr)
		}
		if b, err := os.ReadFile(report); err != nil || string(b) != secret {
			t.Fatalf("after the allowed write: %q %v", b, err)
		}
		if text, isErr := callText(t, agent, "fs.read_text_file", map[string]any{"path": report}); isErr || text != secret {
			t.Fatalf("read back: %q (error %v)", text, isErr)
		}
		// The allowed directory itself can be listed (payee_known on
		// fs_roots), and a directory under it.
		if text, isErr := callText(t, agent, "fs.list_directory", map[string]any{"path": allowed}); isErr || !strings.Contains(text, reportName) {
			t.Fatalf("listing the allowed directory: %q (error %v)", text, isErr)
		}
		if text, isErr := callText(t, agent, "fs.list_allowed_directories", map[string]any{}); isErr || !strings.Contains(text, allowed) {
			t.Fatalf("list_allowed_directories: %q (error %v)", text, isErr)
		}
		for _, e := range l.entries(t) {
			if e["kind"] == "decision" && e["decision"] == "allow" && e["action"] == "fs.write_file" {
				writeIndex = e["index"].(float64)
			}
		}
		if writeIndex < 0 {
			t.Fatal("no allow decision of fs.write_file in the log")
		}
	})

	t.Run("denied write", func(t *testing.T) {
		for _, c := range []struct {
			tool string
			args map[string]any
			file string
		}{
			{"fs.write_file", map[string]any{"path": filepath.Join(evil, deniedName), "content": secret}, filepath.Join(evil, deniedName)},
			{"fs.create_directory", map[string]any{"path": filepath.Join(evil, deniedName)}, filepath.Join(evil, deniedName)},
			{"fs.edit_file", map[string]any{"path": filepath.Join(evil, deniedName), "edits": []any{}}, ""},
			{"fs.read_text_file", map[string]any{"path": filepath.Join(evil, deniedName)}, ""},
			{"fs.list_directory", map[string]any{"path": evil}, ""},
			{"fs.read_multiple_files", map[string]any{"paths": []string{report}}, ""},
		} {
			text, isErr := callText(t, agent, c.tool, c.args)
			if !isErr || !strings.Contains(text, "denied by the ledger's policies") || !strings.Contains(text, "not forwarded") {
				t.Errorf("%s in allowed-evil: %q (error %v)", c.tool, text, isErr)
			}
			if c.file != "" && exists(c.file) {
				t.Errorf("%s: a denied call reached the server: %s exists", c.tool, c.file)
			}
		}
		// Two "path" members: the policy would see one and the server,
		// whose JSON.parse keeps the last, the other; the strict domain
		// refuses the call before the ledger is asked.
		dup := json.RawMessage(`{"path":"` + report + `","path":"` + filepath.Join(evil, deniedName) + `","content":"x"}`)
		if text, isErr := callText(t, agent, "fs.write_file", dup); !isErr || !strings.Contains(text, "refused, not forwarded") || exists(filepath.Join(evil, deniedName)) {
			t.Errorf("a call with two paths: %q (error %v)", text, isErr)
		}
		// A path the gateway cannot project is refused before the ledger.
		text, isErr := callText(t, agent, "fs.write_file", map[string]any{"path": allowed + "/../allowed-evil/" + deniedName, "content": secret})
		if !isErr || !strings.Contains(text, "refused, not forwarded") || exists(filepath.Join(evil, deniedName)) {
			t.Errorf("a path with a dot segment: %q (error %v)", text, isErr)
		}
	})

	t.Run("inspector", func(t *testing.T) {
		p := filepath.Join(allowed, inspName)
		if text, isErr := inspectorCall(t, g, "fs.write_file", "path="+p, "content="+inspSecret); isErr {
			t.Fatalf("inspector-cli's allowed write: %s", text)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != inspSecret {
			t.Fatalf("after inspector-cli's write: %q %v", b, err)
		}
		denied := filepath.Join(evil, inspDenied)
		if text, isErr := inspectorCall(t, g, "fs.write_file", "path="+denied, "content="+inspSecret); !isErr || !strings.Contains(text, "denied") {
			t.Fatalf("inspector-cli's denied write: %q (error %v)", text, isErr)
		}
		if exists(denied) {
			t.Fatal("inspector-cli's denied write reached the server")
		}
	})

	t.Run("undeclared tool", func(t *testing.T) {
		for _, name := range []string{"fs.delete_file", "write_file", "other.write_file"} {
			text, isErr := callText(t, agent, name, map[string]any{"path": report})
			if !isErr || !strings.Contains(text, "refused, not forwarded") {
				t.Errorf("%s: %q (error %v)", name, text, isErr)
			}
		}
		if !exists(report) {
			t.Fatal("the report is gone")
		}
	})

	moved := filepath.Join(allowed, movedName)
	var closed []string // approvals consumed or denied
	t.Run("move needs approval", func(t *testing.T) {
		move := map[string]any{"source": report, "destination": moved}
		text, isErr := callText(t, agent, "fs.move_file", move)
		if !isErr || !strings.Contains(text, "still pending") || !strings.Contains(text, l.url+"/approvals/sha256:") {
			t.Fatalf("an unapproved move: %q (error %v)", text, isErr)
		}
		id := approvalID(t, text)
		if exists(moved) || !exists(report) {
			t.Fatal("an unapproved move reached the server")
		}

		// Other arguments, before and after the approval: their own
		// decision (an approval of their own, pending), never the
		// approved one.
		other := map[string]any{"source": report, "destination": filepath.Join(allowed, otherName)}
		text, isErr = callText(t, agent, "fs.move_file", other)
		if !isErr || strings.Contains(text, id) || !strings.Contains(text, "still pending") {
			t.Fatalf("a move with other arguments: %q (error %v)", text, isErr)
		}
		otherID := approvalID(t, text)

		approveInChromium(t, chromium, l, id, "fs.move_file")

		text, isErr = callText(t, agent, "fs.move_file", other)
		if !isErr || strings.Contains(text, id) || exists(filepath.Join(allowed, otherName)) || !exists(report) {
			t.Fatalf("other arguments after the approval: %q (error %v)", text, isErr)
		}
		outside := map[string]any{"source": report, "destination": filepath.Join(evil, movedName)}
		if text, isErr = callText(t, agent, "fs.move_file", outside); !isErr || !strings.Contains(text, "denied") || exists(filepath.Join(evil, movedName)) {
			t.Fatalf("a move out of the allowed directory after the approval: %q (error %v)", text, isErr)
		}

		// 64 concurrent retries of the approved call: one consumes the
		// approval and moves the file, the others are refused.
		var wg sync.WaitGroup
		var mu sync.Mutex
		answered := map[string]int{}
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text, isErr := callText(t, agent, "fs.move_file", move)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case !isErr:
					answered["moved"]++
				case strings.Contains(text, "approval_consumed") || strings.Contains(text, "was consumed"):
					answered["refused"]++
				case strings.Contains(text, "Error: ENOENT") || strings.Contains(text, "no such file"):
					// The server's own error: forwarded after the move.
					answered["forwarded again"]++
				default:
					t.Errorf("a retry: %q", text)
				}
			}()
		}
		wg.Wait()
		if answered["moved"] != 1 || answered["forwarded again"] != 0 {
			t.Fatalf("64 retries: %v; want exactly one move", answered)
		}
		if b, err := os.ReadFile(moved); err != nil || string(b) != secret || exists(report) {
			t.Fatalf("after the approved move: %q %v; the source exists: %v", b, err, exists(report))
		}
		// The other approval is denied on the page, so its preview (the
		// arguments in full, shown to the approver) is removed.
		l.approve(t, otherID, "deny")
		closed = append(closed, id, otherID)
		t.Logf("64 retries: %v", answered)
	})

	var export string
	var exportBytes []byte // export is removed with the subtest's directory
	t.Run("log", func(t *testing.T) {
		export = l.export(t)
		var err error
		if exportBytes, err = os.ReadFile(export); err != nil {
			t.Fatal(err)
		}
		l.verify(t, "export", export)
		l.verify(t, "decisions", export, "--policies", policies)
		var a struct {
			Result   string
			Consumed int
			Approved int
			Denied   int
			Outcomes map[string]int
		}
		out := l.verify(t, "approvals", export, "--json")
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("ledger-verify approvals --json: %v\n%s", err, out)
		}
		if a.Result != "valid" || a.Approved != 1 || a.Denied != 1 || a.Consumed != 1 || a.Outcomes["succeeded"] < 1 {
			t.Errorf("ledger-verify approvals: %s", out)
		}
		// Each scenario's entries: the allowed writes (the Go client's and
		// inspector-cli's), the denied calls, the moves asked for, the
		// two verdicts, one consumption and its outcome; nothing for the
		// calls the gateway refused itself (an undeclared tool, two path
		// members, a dot segment).
		var outcome map[string]any
		count := map[string]int{}
		for _, e := range l.entries(t) {
			if e["kind"] == "outcome" && e["decision"] == writeIndex {
				outcome = e
			}
			k := fmt.Sprint(e["kind"])
			switch e["kind"] {
			case "decision":
				k += " " + fmt.Sprint(e["action"]) + " " + fmt.Sprint(e["decision"])
			case "approval":
				k += " " + fmt.Sprint(e["verdict"])
			case "outcome":
				k += " " + fmt.Sprint(e["result"])
			}
			count[k]++
		}
		for k, want := range map[string]int{
			"decision fs.write_file allow": 2, "decision fs.write_file deny": 2, "decision fs.create_directory deny": 1,
			"decision fs.edit_file deny": 1, "decision fs.read_text_file allow": 1, "decision fs.read_text_file deny": 1,
			"decision fs.list_directory allow": 1, "decision fs.list_directory deny": 1, "decision fs.read_multiple_files deny": 1,
			"decision fs.list_allowed_directories allow": 1, "decision fs.move_file deny": 1,
			"approval approve": 1, "approval deny": 1, "consumption": 1,
		} {
			if count[k] != want {
				t.Errorf("%d entries %q, want %d (all: %v)", count[k], k, want, count)
			}
		}
		// The retries of the approved move, refused, opened none of their
		// own; the call with other arguments, made twice, opened one.
		if n := count["decision fs.move_file needs_approval"]; n != 2 {
			t.Errorf("%d moves asked for, want 2: the approved one and one with other arguments", n)
		}
		for k := range count {
			if strings.Contains(k, "delete_file") || strings.Contains(k, "other.") {
				t.Errorf("an entry for a tool not declared: %s", k)
			}
		}
		switch {
		case outcome == nil:
			t.Errorf("no outcome of the allowed write (entry %v) in the log", writeIndex)
		case outcome["result"] != "succeeded":
			t.Errorf("the allowed write's outcome: %v", outcome)
		}
	})

	t.Run("ledgerd stopped", func(t *testing.T) {
		l.stop(t)
		// The calls at once: each is refused only after the gateway's
		// client gave up on the ledger (5 tries, 1.5 s). Whether one
		// reached the server is checked once all are answered.
		calls := []struct {
			tool string
			args map[string]any
			file string
		}{
			{"fs.write_file", map[string]any{"path": filepath.Join(allowed, downName), "content": secret}, filepath.Join(allowed, downName)},
			{"fs.create_directory", map[string]any{"path": filepath.Join(allowed, downDirName)}, filepath.Join(allowed, downDirName)},
			{"fs.move_file", map[string]any{"source": moved, "destination": filepath.Join(allowed, downName)}, filepath.Join(allowed, downName)},
		}
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				text, isErr := callText(t, agent, c.tool, c.args)
				if !isErr || !strings.Contains(text, "not forwarded") || !strings.Contains(text, "ledger") {
					t.Errorf("%s with ledgerd stopped: %q (error %v)", c.tool, text, isErr)
				}
			})
		}
		p := filepath.Join(allowed, downName)
		text, isErr := inspectorCall(t, g, "fs.write_file", "path="+p, "content="+inspSecret) // may t.Fatal: on the test's goroutine
		if !isErr {
			t.Errorf("inspector-cli with ledgerd stopped: %q (error %v)", text, isErr)
		}
		wg.Wait()
		for _, c := range calls {
			if exists(c.file) {
				t.Errorf("%s reached the server with ledgerd stopped", c.tool)
			}
		}
		if exists(p) {
			t.Error("inspector-cli's write reached the server with ledgerd stopped")
		}
		if !exists(moved) {
			t.Error("the moved file is gone")
		}
	})

	t.Run("leak", func(t *testing.T) {
		if exportBytes == nil {
			t.Fatal("no export")
		}
		where := map[string][]byte{"the export": exportBytes}
		for i, line := range strings.Split(g.stderr.String(), "\n") {
			where[fmt.Sprintf("the gateway's log line %d", i+1)] = []byte(line)
		}
		where["the gateway's stdout"] = []byte(g.stdout.String())
		where["ledgerd's log"] = []byte(l.stderr.String() + l.stdout.String())
		// The previews of approvals still open hold the arguments in
		// full, for the approver (docs/approvals.md, "Where previews
		// live"): retries after the consumption opened some. Those of
		// the approvals closed are gone; every other file is checked.
		files, open := 0, 0
		err := filepath.WalkDir(l.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if filepath.Base(filepath.Dir(path)) == "previews" {
				for _, id := range closed {
					if strings.Contains(d.Name(), strings.TrimPrefix(id, "sha256:")) {
						t.Errorf("the preview of closed approval %s is still stored: %s", id, path)
					}
				}
				open++
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			where[path] = b
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range where {
			for _, raw := range raws {
				if bytes.Contains(b, []byte(raw)) {
					t.Errorf("%s holds %q", name, raw)
				}
			}
		}
		// The directories do cross (they are what the policies decide
		// on), so the search would find a value where it is recorded; a
		// full path never does.
		inStore := false
		for name, b := range where {
			if strings.HasPrefix(name, l.dir) && bytes.Contains(b, []byte(`"resource_dir":"`+allowed+`"`)) {
				inStore = true
			}
		}
		if !bytes.Contains(where["the export"], []byte(`"resource_dir":"`+allowed+`"`)) || !inStore {
			t.Errorf("the allowed directory is not in the export (%v) or in a file of the store (%v): are the attributes recorded?",
				bytes.Contains(where["the export"], []byte(allowed)), inStore)
		}
		if len(closed) != 2 {
			t.Errorf("closed approvals: %v", closed)
		}
		t.Logf("checked the export, %d files of ledgerd's data directory (besides %d previews of open approvals) and both logs", files, open)
	})
	t.Logf("the filesystem scenarios took %v", time.Since(began).Round(time.Millisecond))
}
