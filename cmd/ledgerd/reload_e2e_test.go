package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonReload runs the real ledgerd and the real token and approver
// commands, each change followed by SIGHUP: a mediator added is accepted,
// a rotated token refused and its successor accepted; a removed
// approver's session refused at its next page request, and still after
// the name is added again; a config that fails its checks changes
// nothing (the old credentials work, the metric counts it, the log names
// the problem and no secret); a changed listen address is named in a
// warning, and is not applied.
func TestDaemonReload(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	d := startDaemon(t, bin, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	command := func(stdin string, args ...string) (string, string) {
		t.Helper()
		return runLedgerd(t, bin, stdin, append(args, "--data", data)...)
	}
	const alicePassword, bobPassword = "alice's password 123", "bob's password 123"
	command(alicePassword+"\n", "approver", "add", "alice", "--actions", "*")
	command(bobPassword+"\n", "approver", "add", "bob", "--actions", "*")
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	local := string(tokenBytes)
	d = startDaemon(t, bin, dir)
	url := "http://" + d.addr
	hup := func() {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(line string) bool {
		_, b := apitest.GetBody(t, url+"/metrics")
		return strings.Contains(string(b), line+"\n")
	}
	reloaded := func(n int) {
		t.Helper()
		apitest.WaitFor(t, "the reload", func() bool {
			return metric(`ledgerd_config_reloads_total{result="ok"} ` + strconv.FormatUint(uint64(n), 10))
		})
	}
	if code := apitest.AppendWith(t, url, local, 1); code != http.StatusCreated {
		t.Fatalf("append with the first token: %d", code)
	}

	// A mediator added.
	second, stderr := command("", "token", "add", "second")
	if !strings.Contains(stderr, "SIGHUP") {
		t.Errorf("token add does not say how to reload:\n%s", stderr)
	}
	if code := apitest.AppendWith(t, url, second, 2); code != http.StatusUnauthorized {
		t.Errorf("the new mediator before SIGHUP: %d, want 401", code)
	}
	hup()
	reloaded(1)
	if code := apitest.AppendWith(t, url, second, 3); code != http.StatusCreated {
		t.Errorf("the new mediator after SIGHUP: %d, want 201", code)
	}
	if line := waitLogLine(t, d, "config reloaded"); !strings.Contains(line, `"mediators_added":"second"`) {
		t.Errorf("the reload's log line does not name the mediator added: %s", line)
	}

	// A token rotated.
	rotated, _ := command("", "token", "rotate", "local")
	if code := apitest.AppendWith(t, url, local, 4); code != http.StatusCreated {
		t.Errorf("the old token before SIGHUP: %d, want 201", code)
	}
	hup()
	reloaded(2)
	if code := apitest.AppendWith(t, url, local, 5); code != http.StatusUnauthorized {
		t.Errorf("the rotated token after SIGHUP: %d, want 401", code)
	}
	if code := apitest.AppendWith(t, url, rotated, 6); code != http.StatusCreated {
		t.Errorf("the new token after SIGHUP: %d, want 201", code)
	}

	// An approver removed: their session ends; the other's stays.
	page := func(name, password string) *apitest.PageClient {
		p := apitest.NewPageClient(t, url)
		p.SignIn(name, password)
		return p
	}
	alice, bob := page("alice", alicePassword), page("bob", bobPassword)
	list := func(p *apitest.PageClient) int {
		resp, _ := p.Do("GET", "/approvals/", nil)
		return resp.StatusCode
	}
	if list(alice) != 200 || list(bob) != 200 {
		t.Fatalf("signed in: %d %d", list(alice), list(bob))
	}
	_, stderr = command("", "approver", "remove", "alice")
	if !strings.Contains(stderr, "SIGHUP") {
		t.Errorf("approver remove does not say how to reload:\n%s", stderr)
	}
	hup()
	reloaded(3)
	if list(alice) != http.StatusUnauthorized || list(bob) != 200 {
		t.Errorf("after removing alice: alice's session %d, bob's %d; want 401, 200", list(alice), list(bob))
	}
	command(alicePassword+"\n", "approver", "add", "alice", "--actions", "*")
	hup()
	reloaded(4)
	if list(alice) != http.StatusUnauthorized {
		t.Errorf("alice's session from before her removal, after she is added again: %d, want 401", list(alice))
	}
	page("alice", alicePassword)
	// --listen differs from the file's listen: that is no change.
	if line := logLine(d.stderr.String(), "take effect only at a restart"); line != "" {
		t.Errorf("a restart warning where only credentials changed: %s", line)
	}

	// A config that fails its checks: nothing changes.
	path := filepath.Join(data, configName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(good, &cfg)
	const secret = "0123456789abcdefSECRET"
	cfg["mediators"] = []any{
		map[string]any{"name": "local", "token_sha256": apitest.TokenHash("reload-other-example")},
		map[string]any{"name": "broken", "token_sha256": secret},
	}
	bad, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	apitest.WaitFor(t, "the refusal", func() bool { return metric(`ledgerd_config_reloads_total{result="failed"} 1`) })
	line := waitLogLine(t, d, "config reload refused")
	if !strings.Contains(line, "mediators[1] (broken): token_sha256 is not 64 lower-case hex digits") || strings.Contains(line, secret) {
		t.Errorf("the refusal's log line: %s, want the field named and not its value", line)
	}
	if code := apitest.AppendWith(t, url, rotated, 7); code != http.StatusCreated {
		t.Errorf("the token in force after a refused reload: %d, want 201", code)
	}
	if code := apitest.AppendWith(t, url, second, 8); code != http.StatusCreated {
		t.Errorf("the other mediator after a refused reload: %d, want 201", code)
	}

	// A changed listen address: named, not applied; the credentials are.
	json.Unmarshal(good, &cfg)
	cfg["listen"] = "127.0.0.1:1"
	cfg["mediators"] = cfg["mediators"].([]any)[:1] // local alone
	changed, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	reloaded(5)
	warning := waitLogLine(t, d, "take effect only at a restart")
	if !strings.Contains(warning, `"fields":"listen"`) {
		t.Errorf("the warning: %q, want it to name listen alone", warning)
	}
	if code := apitest.AppendWith(t, url, rotated, 9); code != http.StatusCreated {
		t.Errorf("append at the address in force: %d", code)
	}
	if code := apitest.AppendWith(t, url, second, 10); code != http.StatusUnauthorized {
		t.Errorf("the removed mediator: %d, want 401", code)
	}
	if log := d.stderr.String(); strings.Contains(log, apitest.TokenHash(rotated)) || strings.Contains(log, rotated) || strings.Contains(log, alicePassword) {
		t.Error("the log shows a token, a token's hash or a password")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("ledgerd stopped: %v\n%s", err, d.stderr.String())
	}
}

// waitLogLine returns the first line of d's log that contains s, waiting
// for it: the log reaches the test through a pipe, after the metric that
// says the reload is done.
func waitLogLine(t *testing.T, d *process, s string) string {
	t.Helper()
	var line string
	apitest.WaitFor(t, "a log line with "+strconv.Quote(s), func() bool {
		line = logLine(d.stderr.String(), s)
		return line != ""
	})
	return line
}

// runLedgerd runs the ledgerd binary bin with args and stdin, and returns
// its standard output, trimmed, and its standard error; it fails the test
// if the command fails.
func runLedgerd(t *testing.T, bin, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ledgerd %v: %v\n%s", args, err, errOut.String())
	}
	return strings.TrimSpace(string(out)), errOut.String()
}
