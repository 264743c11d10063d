package npmtest

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConformanceEverythingDirect runs the conformance suite against
// server-everything itself: the baseline that the gateway's run through
// it is compared with (CONFORMANCE.md).
func TestConformanceEverythingDirect(t *testing.T) {
	t.Parallel() // waits on node processes of its own
	url := StartEverything(t)
	passed, failed := Conformance(t, url)
	t.Logf("passed (%d): %s", len(passed), strings.Join(passed, " "))
	t.Logf("failed (%d): %s", len(failed), strings.Join(failed, " "))
	if len(passed) == 0 {
		t.Fatal("no scenario passed")
	}
	// server-everything has the basics; it lacks the suite's own fixtures
	// (test_* tools, prompts and resources), so some scenarios fail.
	for _, s := range []string{"server-initialize", "ping", "tools-list", "prompts-list", "resources-list"} {
		if !slices.Contains(passed, s) {
			t.Errorf("scenario %s did not pass", s)
		}
	}
	if len(failed) == 0 {
		t.Error("no scenario failed: server-everything lacks the suite's fixtures, so the results were misread")
	}
}

// TestInspectorFilesystem drives server-filesystem over stdio with
// inspector-cli: tools/list, then a write_file into a temporary directory.
func TestInspectorFilesystem(t *testing.T) {
	t.Parallel() // waits on node processes of its own
	dir := t.TempDir()
	server := []string{Node(t), Bin(t, "mcp-server-filesystem"), dir}

	out, err := Inspector(t, append(server, "--method", "tools/list")...)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "write_file") {
		t.Fatalf("tools/list has no write_file: %v", names)
	}

	file := filepath.Join(dir, "note.txt")
	const content = "written by inspector-cli for example.com"
	out, err = Inspector(t, append(server, "--method", "tools/call", "--tool-name", "write_file",
		"--tool-arg", "path="+file, "content="+content)...)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.IsError {
		t.Fatalf("write_file: isError=%v, %v\n%s", res.IsError, err, out)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Fatalf("file holds %q, want %q", got, content)
	}

	// A path outside the allowed directory is refused, and the file is
	// not made.
	outside := filepath.Join(t.TempDir(), "outside.txt")
	out, err = Inspector(t, append(server, "--method", "tools/call", "--tool-name", "write_file",
		"--tool-arg", "path="+outside, "content=x")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.IsError {
		t.Fatalf("write_file outside the allowed directory: isError=%v, %v\n%s", res.IsError, err, out)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("write_file outside the allowed directory made the file: %v", err)
	}
}

// TestEnsureWithoutNpm: with no install and neither node nor npm on PATH,
// the install says so (and Dir would skip on it).
func TestEnsureWithoutNpm(t *testing.T) {
	t.Setenv("LEDGER_NPM_DIR", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, err := ensure()
	if !errors.Is(err, ErrNoNpm) {
		t.Fatalf("ensure: %v, want ErrNoNpm", err)
	}
}

// writeResult makes the result directory the suite makes for scenario.
func writeResult(t *testing.T, dir, scenario, checks string) {
	t.Helper()
	d := filepath.Join(dir, "server-"+scenario+"-2026-12-02T02-17-08-297Z")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if checks != "" {
		if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The suite's output, as conformance 0.1.16 prints it, for three scenarios.
const suiteOutput = `Running active suite (3 scenarios) against http://127.0.0.1:39123/mcp


=== Running scenario: server-initialize ===
Running client scenario 'server-initialize' against server: http://127.0.0.1:39123/mcp
Results saved to /tmp/res/server-server-initialize-2026-12-02T02-17-07-983Z

=== Running scenario: tools-call-image ===
Running client scenario 'tools-call-image' against server: http://127.0.0.1:39123/mcp
Results saved to /tmp/res/server-tools-call-image-2026-12-02T02-17-08-472Z

=== Running scenario: dns-rebinding-protection ===
Running client scenario 'dns-rebinding-protection' against server: http://127.0.0.1:39123/mcp
Results saved to /tmp/res/server-dns-rebinding-protection-2026-12-02T02-17-09-289Z


=== SUMMARY ===
✓ server-initialize: 1 passed, 0 failed
✗ tools-call-image: 0 passed, 1 failed
✗ dns-rebinding-protection: 1 passed, 1 failed

Total: 2 passed, 2 failed
`

func TestParseResults(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "server-initialize", `[
  {"id": "server-initialize", "name": "ServerInitialize", "status": "SUCCESS"},
  {"id": "server-info", "name": "ServerInfo", "status": "INFO"},
  {"id": "sse-last-event-id", "name": "X", "status": "WARNING", "errorMessage": "a SHOULD"}
]`)
	writeResult(t, dir, "tools-call-image", `[
  {"id": "tools-call-image", "status": "FAILURE", "errorMessage": "No image content found"}
]`)
	writeResult(t, dir, "dns-rebinding-protection", `[
  {"id": "localhost-host-rebinding-rejected", "status": "FAILURE", "errorMessage": "Expected HTTP 4xx for invalid Host/Origin headers, got 200"},
  {"id": "localhost-host-valid-accepted", "status": "SUCCESS"}
]`)
	got, err := parseResults(dir, []byte(suiteOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []scenarioResult{
		{scenario: "dns-rebinding-protection", failed: true, reason: "localhost-host-rebinding-rejected: Expected HTTP 4xx for invalid Host/Origin headers, got 200"},
		{scenario: "server-initialize"},
		{scenario: "tools-call-image", failed: true, reason: "tools-call-image: No image content found"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseResults:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseResultsIncomplete(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string)
		output string
		want   string
	}{
		{"no suite line", func(t *testing.T, dir string) {}, "Server test error: boom\n", "no \"Running active suite"},
		{"a scenario without results", func(t *testing.T, dir string) {
			writeResult(t, dir, "server-initialize", `[{"id": "a", "status": "SUCCESS"}]`)
			writeResult(t, dir, "tools-call-image", `[{"id": "a", "status": "SUCCESS"}]`)
		}, suiteOutput, "scenario dns-rebinding-protection ran but saved no results"},
		{"fewer scenarios than announced", func(t *testing.T, dir string) {
			writeResult(t, dir, "server-initialize", `[{"id": "a", "status": "SUCCESS"}]`)
		}, "Running active suite (2 scenarios) against http://127.0.0.1:1/mcp\n=== Running scenario: server-initialize ===\n", "announced 2 scenarios, ran 1 and saved 1"},
		{"an unknown status", func(t *testing.T, dir string) {
			writeResult(t, dir, "server-initialize", `[{"id": "a", "status": "PASSED"}]`)
		}, "Running active suite (1 scenarios) against http://127.0.0.1:1/mcp\n=== Running scenario: server-initialize ===\n", `unknown status "PASSED"`},
		{"no checks", func(t *testing.T, dir string) {
			writeResult(t, dir, "server-initialize", `[]`)
		}, "Running active suite (1 scenarios) against http://127.0.0.1:1/mcp\n=== Running scenario: server-initialize ===\n", "holds no checks"},
		{"a stray file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "summary.txt"), nil, 0o644)
		}, "Running active suite (0 scenarios) against http://127.0.0.1:1/mcp\n", `unexpected entry "summary.txt"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := parseResults(dir, []byte(tc.output))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseResults: %v, want an error saying %q", err, tc.want)
			}
		})
	}

	// A scenario that threw left its directory without checks.json: it
	// failed.
	dir := t.TempDir()
	writeResult(t, dir, "ping", "")
	got, err := parseResults(dir, []byte("Running active suite (1 scenarios) against http://127.0.0.1:1/mcp\n=== Running scenario: ping ===\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].scenario != "ping" || !got[0].failed {
		t.Fatalf("parseResults: %+v, want ping failed", got)
	}
}

// TestInspectorEverythingHTTP calls server-everything's echo tool over
// streamable HTTP with inspector-cli, a bearer token header included, as
// a test through an authenticating gateway would.
func TestInspectorEverythingHTTP(t *testing.T) {
	t.Parallel() // waits on node processes of its own
	url := StartEverything(t)
	out, err := Inspector(t, url, "--transport", "http", "--header", "Authorization: Bearer token-for-example.com",
		"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hello from example.org")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "Echo: hello from example.org" {
		t.Fatalf("echo: %v\n%s", err, out)
	}
}

// TestListeningPort finds the port of this process's one listener.
func TestListeningPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := listeningPort(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if want := l.Addr().(*net.TCPAddr).Port; got != want {
		t.Fatalf("listeningPort = %d, want %d", got, want)
	}
	l2, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer l2.Close()
	if _, err := listeningPort(os.Getpid()); err == nil || !strings.Contains(err.Error(), "holds 2 listening TCP sockets") {
		t.Fatalf("listeningPort with two listeners: %v", err)
	}
}

// TestEnsureNpmFails: npm ci that cannot reach its registry is errInstall
// (which Dir skips on, or fails on when LEDGER_CI=1), and the directory
// is not taken for an install.
func TestEnsureNpmFails(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, ErrNoNpm)
		}
	}
	dir := t.TempDir()
	t.Setenv("LEDGER_NPM_DIR", dir)
	t.Setenv("npm_config_cache", t.TempDir())              // nothing cached
	t.Setenv("npm_config_registry", "http://127.0.0.1:1/") // refused at once
	t.Setenv("npm_config_fetch_retries", "0")
	t.Setenv("npm_config_offline", "false")
	_, err := ensure()
	if !errors.Is(err, errInstall) {
		t.Fatalf("ensure: %v, want errInstall", err)
	}
	t.Log(err)
	if installed(dir) {
		t.Fatal("a failed npm ci left the directory looking installed")
	}
}
