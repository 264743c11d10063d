package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/commit"
)

// bins are the binaries under test, built once per test run.
var bins struct {
	once                            sync.Once
	dir                             string
	ledgerd, ledgerMCP, ledgerVerif string
	err                             error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binaries builds ledgerd, ledger-mcp and ledger-verify, in one go build
// (which links them in parallel).
func binaries(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "ledger-mcp-bins")
		if bins.err != nil {
			return
		}
		// go build -o DIR/ names each binary after its package's directory.
		bins.ledgerd, bins.ledgerMCP, bins.ledgerVerif = filepath.Join(bins.dir, "ledgerd"), filepath.Join(bins.dir, "ledger-mcp"), filepath.Join(bins.dir, "ledger-verify")
		pkgs := []string{"../ledgerd", "../ledger-mcp", "../ledger-verify"}
		// A benchmark may compare another build of ledger-mcp.
		if bin := os.Getenv("LEDGER_MCP_TEST_BINARY"); bin != "" {
			pkgs = slices.DeleteFunc(pkgs, func(p string) bool { return p == "../ledger-mcp" })
			bins.ledgerMCP = bin
		}
		args := append([]string{"build", "-o", bins.dir + string(filepath.Separator)}, pkgs...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

// lockedBuffer is a buffer a child process writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a running binary, killed at the test's end.
type proc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	stdout *lockedBuffer
}

func (p *proc) stop(t testing.TB) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// start runs bin and returns once a line of its output (stdout, then
// stderr) has prefix, with the rest of that line.
func start(t testing.TB, stdin io.Reader, prefix string, bin string, args ...string) (*proc, string) {
	t.Helper()
	return startEnv(t, nil, stdin, prefix, bin, args...)
}

// startEnv is start with the environment env (nil: the test's).
func startEnv(t testing.TB, env []string, stdin io.Reader, prefix string, bin string, args ...string) (*proc, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = stdin
	p := &proc{cmd: cmd, stderr: &lockedBuffer{}, stdout: &lockedBuffer{}}
	found := make(chan string, 1)
	w := &lineWatch{prefix: prefix, found: found}
	cmd.Stdout = io.MultiWriter(p.stdout, w)
	cmd.Stderr = io.MultiWriter(p.stderr, w)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	select {
	case rest := <-found:
		return p, rest
	case <-time.After(60 * time.Second):
		t.Fatalf("%s %v did not print %q within 60 s\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, prefix, p.stdout, p.stderr)
	}
	return nil, ""
}

// lineWatch reports the first line starting with prefix.
type lineWatch struct {
	mu     sync.Mutex
	buf    []byte
	prefix string
	found  chan string
	done   bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if rest, ok := strings.CutPrefix(line, w.prefix); ok && !w.done {
			w.done = true
			w.found <- rest
		}
	}
	return len(p), nil
}

// ledger is a running ledgerd with a catalog, policies and approvals.
type ledger struct {
	*proc
	dir, url, vkey, token string
}

const (
	approverName     = "alice"
	approverPassword = "correct horse battery staple"
)

// startLedger makes a data directory with mediator "gateway", approver
// alice (every action), the catalog and the policies, and serves it on a
// free loopback port, checkpointing every 20 ms.
func startLedger(t testing.TB, catalog, policies string) *ledger {
	t.Helper()
	return startLedgerWith(t, catalog, policies, map[string]any{"checkpoint_interval": "20ms"})
}

// startLedgerWith is startLedger with settings added to ledgerd.json
// instead of the short checkpoint interval.
func startLedgerWith(t testing.TB, catalog, policies string, settings map[string]any) *ledger {
	t.Helper()
	binaries(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	out, err := exec.Command(bins.ledgerd, "init", "--name", "ledger.example.com/log", "--data", data, "--mediator", "gateway").CombinedOutput()
	if err != nil {
		t.Fatalf("ledgerd init: %v\n%s", err, out)
	}
	l := &ledger{dir: data}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, `mediator "gateway" token (shown once, stored only as a hash): `); ok {
			l.token = rest
		}
	}
	add := exec.Command(bins.ledgerd, "approver", "add", approverName, "--actions", "*", "--data", data)
	add.Stdin = strings.NewReader(approverPassword + "\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ledgerd approver add: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(data, "ledgerd.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["catalog_dir"], cfg["policy_dir"] = catalog, policies
	for k, v := range settings {
		cfg[k] = v
	}
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l.serve(t)
	return l
}

func (l *ledger) serve(t testing.TB) {
	t.Helper()
	p, rest := start(t, nil, "verifier key: ", bins.ledgerd, "serve", "--data", l.dir, "--listen", "127.0.0.1:0")
	l.proc, l.vkey = p, rest
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if _, addr, ok := strings.Cut(line, " on http://"); ok && strings.HasPrefix(line, "ledgerd: serving") {
			l.url = "http://" + addr
		}
	}
	if l.url == "" {
		t.Fatalf("ledgerd printed no address:\n%s", p.stdout)
	}
}

// export fetches the whole log as an export file, once a checkpoint
// covers every entry sequenced so far: a verdict given on the page is
// acknowledged when it is sequenced, before a checkpoint commits to it.
func (l *ledger) export(t testing.TB) string {
	t.Helper()
	sequenced := uint64(len(l.entries(t)))
	var size uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(l.url + "/v1/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lines := strings.Split(string(b), "\n")
		if len(lines) > 1 {
			fmt.Sscan(lines[1], &size)
		}
		if size > 0 && size >= sequenced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint covers the %d entries sequenced after 30 s (latest covers %d)", sequenced, size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(fmt.Sprintf("%s/v1/export?start=0&end=%d", l.url, size))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, b)
	}
	path := filepath.Join(t.TempDir(), "export")
	os.WriteFile(path, b, 0o644)
	return path
}

// verify runs ledger-verify CMD on an export and returns its JSON report.
func (l *ledger) verify(t testing.TB, cmd, export string, extra ...string) string {
	t.Helper()
	args := append([]string{cmd, "--key", l.vkey}, extra...)
	args = append(args, export)
	out, err := exec.Command(bins.ledgerVerif, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ledger-verify %s: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// entries fetches every entry of the log, as JSON objects.
func (l *ledger) entries(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i := 0; ; i++ {
		resp, err := http.Get(fmt.Sprintf("%s/v1/entries/%d", l.url, i))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 404 {
			return out
		}
		var e map[string]any
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		out = append(out, e)
	}
}

// approve signs in as alice and gives verdict on approval id over the
// page's JSON interface, as a script would (the browser test does it in
// Chromium).
func (l *ledger) approve(t testing.TB, id, verdict string) {
	t.Helper()
	if err := l.approveErr(id, verdict); err != nil {
		t.Fatal(err)
	}
}

// approveErr is approve for a goroutine other than the test's.
func (l *ledger) approveErr(id, verdict string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	post := func(path string, form url.Values) (map[string]any, error) {
		req, _ := http.NewRequest("POST", l.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", l.url)
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m, nil
	}
	signIn, err := post("/approvals/sign-in", url.Values{"name": {approverName}, "password": {approverPassword}})
	if err != nil {
		return err
	}
	csrf, _ := signIn["csrf"].(string)
	req, _ := http.NewRequest("GET", l.url+"/approvals/"+id, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var shown map[string]any
	json.Unmarshal(b, &shown)
	digest, _ := shown["preview_digest"].(string)
	if resp.StatusCode != 200 || digest == "" {
		return fmt.Errorf("GET approval %s: %d %s", id, resp.StatusCode, b)
	}
	_, err = post("/approvals/"+id+"/verdict", url.Values{"verdict": {verdict}, "preview_digest": {digest}, "csrf": {csrf}, "confirm": {"yes"}})
	return err
}

// gateway is a running ledger-mcp serve --http.
type gateway struct {
	*proc
	url, token string
}

// writeGatewayConfig writes a config for the gateway in front of servers
// (name → server member), with one agent whose token it returns. Calls
// are committed to with the hiding commitment, the default, and their
// disclosures kept in the directory "disclosures" beside the config
// (disclosureDir).
func writeGatewayConfig(t testing.TB, l *ledger, catalog string, servers map[string]any, approvals map[string]any) (path, agentToken string) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ledger.token"), []byte(l.token+"\n"), 0o600)
	agentToken = strings.Repeat("ab", 32)
	sum := sha256.Sum256([]byte(agentToken))
	cfg := map[string]any{
		"ledger":           map[string]any{"url": l.url, "token_file": "ledger.token", "verifier_key": l.vkey},
		"declarations_dir": catalog,
		"servers":          servers,
		"stdio":            map[string]any{"principal": "agent:desktop"},
		"http":             map[string]any{"agents": []any{map[string]any{"principal": "agent:notes-bot", "token_sha256": hex.EncodeToString(sum[:])}}},
		"call_timeout":     "20s",
		"disclosures":      "disclosures",
	}
	if approvals != nil {
		cfg["approvals"] = approvals
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path = filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, agentToken
}

// editConfig rewrites the gateway config at path with edit.
func editConfig(t testing.TB, path string, edit func(cfg map[string]any)) {
	t.Helper()
	var cfg map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// disclosureDir is the directory of disclosures writeGatewayConfig's
// config names.
func disclosureDir(config string) string {
	return filepath.Join(filepath.Dir(config), "disclosures")
}

func startGateway(t testing.TB, config, agentToken string) *gateway {
	t.Helper()
	p, rest := start(t, nil, "ledger-mcp: serving on ", bins.ledgerMCP, "serve", "--config", config, "--http", "--listen", "127.0.0.1:0")
	return &gateway{proc: p, url: rest, token: agentToken}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// agent connects a Go SDK client to the gateway as its agent.
func (g *gateway) agent(t testing.TB, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return g.agentAt(t, "", opts)
}

// agentAt connects an agent speaking protocol version (the SDK's latest
// if empty).
func (g *gateway) agentAt(t testing.TB, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: &http.Client{Transport: bearerTransport{g.token}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to the gateway: %v\n%s", err, g.stderr)
	}
	if version != "" && s.InitializeResult().ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", s.InitializeResult().ProtocolVersion, version)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callText calls a tool and returns its text and isError.
func callText(t testing.TB, s *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "error: " + err.Error(), true
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// approvalID finds the approval id a refusal or elicitation names.
func approvalID(t testing.TB, text string) string {
	t.Helper()
	i := strings.Index(text, "sha256:")
	if i < 0 || len(text) < i+71 {
		t.Fatalf("no approval id in %q", text)
	}
	id := text[i : i+71]
	if _, err := commit.ParseDigest(id); err != nil {
		t.Fatalf("%q: %v", id, err)
	}
	return id
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFiles writes name → content under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
