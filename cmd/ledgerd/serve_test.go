package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/storage/badger"
)

// logRecord is apitest.LogRecord: the first JSON log line whose msg is
// msg, waiting for it.
func logRecord(t *testing.T, log fmt.Stringer, msg string) map[string]any {
	t.Helper()
	return apitest.LogRecord(t, log, msg)
}

// serving is a "ledgerd serve" run in this process.
type serving struct {
	stdout []string // up to the last line it prints when it serves
	stderr *apitest.LockedBuffer
	url    string
	stop   func() int // stops it and returns its exit status
}

// startServing runs "ledgerd serve ARGS" until it serves, or fails the
// test.
func startServing(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	s := &serving{stderr: &apitest.LockedBuffer{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...), w, s.stderr)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		s.stdout = append(s.stdout, line)
		if _, addr, ok := strings.Cut(line, " on http://"); ok && strings.HasPrefix(line, "ledgerd: serving") {
			s.url = "http://" + addr
		}
		if _, addr, ok := strings.Cut(line, " on https://"); ok && strings.HasPrefix(line, "ledgerd: serving") {
			s.url = "https://" + addr
		}
		if strings.HasPrefix(line, "export VKEY=") {
			break
		}
	}
	go io.Copy(io.Discard, r)
	var once sync.Once
	code := 0
	s.stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { s.stop() })
	if s.url == "" {
		t.Fatalf("ledgerd serve did not start: exit %d\nstdout %q\nstderr %s", s.stop(), s.stdout, s.stderr)
	}
	return s
}

// line returns what follows prefix on the first stdout line with it.
func (s *serving) line(prefix string) (string, bool) {
	for _, l := range s.stdout {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// A first start that cannot listen issues no token, and the next start
// shows one that works: the failed start must not use up the only copy.
func TestFirstStartBusyPort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--data", dir, "--listen", busy.Addr().String()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") ||
		!strings.Contains(stderr.String(), "ledgerd: hint: no mediator token was issued: the next start") ||
		!strings.Contains(stderr.String(), "ledgerd: hint: another process listens on "+busy.Addr().String()) {
		t.Fatalf("first start on a busy port: exit %d, stderr %q", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "token") {
		t.Errorf("a start that failed printed %q", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dir, configName)); err == nil {
		t.Error("the failed first start left a config, with the hash of a token nobody saw")
	}

	s := startServing(t, "--data", dir, "--listen", "127.0.0.1:0")
	token, ok := s.line(`mediator "local" token (shown once, stored only as a hash): `)
	if !ok {
		t.Fatalf("the second start printed no token: %q", s.stdout)
	}
	if code := apitest.AppendWith(t, s.url, token, 0); code != http.StatusCreated {
		t.Errorf("append with the token the second start printed: HTTP %d", code)
	}
}

// A first start writes only what it chose and Load requires: the key,
// the store and the mediator. Its --listen is that start's, not pinned
// in the file, so that a later plain start listens on the default. (The
// later start is made to find the default busy, held here or by another
// process, so that it names the address it tried without serving.)
func TestFirstStartWritesOnlyWhatItChose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServing(t, "--data", dir, "--listen", "127.0.0.1:0")
	if code := s.stop(); code != 0 {
		t.Fatalf("first start: exit %d", code)
	}
	b, err := os.ReadFile(filepath.Join(dir, configName))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range top {
		names = append(names, name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "key_file,mediators,store_dir" {
		t.Errorf("the first start wrote the members %s, want key_file,mediators,store_dir:\n%s", got, b)
	}

	if held, err := net.Listen("tcp", config.DefaultListen); err == nil {
		defer held.Close()
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--data", dir}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "ledgerd: hint: another process listens on "+config.DefaultListen+":") {
		t.Errorf("a later plain start: exit %d, stderr %q; want it to try %s", code, stderr.String(), config.DefaultListen)
	}
}

// A first start prints lines to paste into a shell, which set TOKEN and
// VKEY to the token and verifier key it shows; its log names the catalog
// at start and the tree's size at shutdown. Later starts print only VKEY,
// and log the catalog they use.
func TestFirstStartOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServing(t, "--data", dir, "--listen", "127.0.0.1:0")
	token, _ := s.line(`mediator "local" token (shown once, stored only as a hash): `)
	vkey, _ := s.line("verifier key: ")
	exportToken, ok1 := s.line("export TOKEN=")
	exportVKey, ok2 := s.line("export VKEY=")
	if token == "" || vkey == "" || !ok1 || !ok2 || exportToken != token || exportVKey != vkey {
		t.Fatalf("first start printed:\n%s", strings.Join(s.stdout, "\n"))
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		script := "export TOKEN=" + exportToken + "\nexport VKEY=" + exportVKey + "\n" + `printf '%s\n%s\n' "$TOKEN" "$VKEY"`
		out, err := exec.Command(sh, "-c", script).Output()
		if err != nil || string(out) != token+"\n"+vkey+"\n" {
			t.Errorf("pasted into sh, the lines set %q (%v)", out, err)
		}
	}
	for i := range 3 {
		if code := apitest.AppendWith(t, s.url, token, i); code != http.StatusCreated {
			t.Fatalf("append %d: HTTP %d", i, code)
		}
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := logRecord(t, s.stderr, "ledgerd started")["catalog"]; got != "none: any action, version 1 entries" {
		t.Errorf("started with catalog %v", got)
	}
	stopped := logRecord(t, s.stderr, "ledgerd stopped")
	if stopped["size"] != 3.0 || stopped["checkpoint_size"] != 3.0 {
		t.Errorf("stopped with %v", stopped)
	}

	// With a catalog, on a later start.
	catalogDir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"config", "set", "catalog_dir", catalogDir, "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("config set catalog_dir: exit %d: %s", code, stderr.String())
	}
	s = startServing(t, "--data", dir, "--listen", "127.0.0.1:0")
	if _, ok := s.line("export TOKEN="); ok {
		t.Errorf("a later start printed a token line: %q", s.stdout)
	}
	if v, _ := s.line("export VKEY="); v != vkey {
		t.Errorf("a later start printed export VKEY=%s, want %s", v, vkey)
	}
	s.stop()
	logged, _ := logRecord(t, s.stderr, "ledgerd started")["catalog"].(map[string]any)
	var actions []string
	for name := range cat {
		actions = append(actions, name)
	}
	slices.Sort(actions)
	want, _ := json.Marshal(map[string]any{"dir": catalogDir, "actions": actions})
	if got, _ := json.Marshal(logged); string(got) != string(want) {
		t.Errorf("started with catalog %s, want %s", got, want)
	}
}

// The usage states the default memory limit that main sets.
func TestUsageMemoryLimit(t *testing.T) {
	if want := fmt.Sprintf("Default when unset: %dMiB", badger.MemoryLimit>>20); !strings.Contains(usage, want) {
		t.Errorf("the usage does not say %q", want)
	}
}

// The README's first command, as a built binary without GOMEMLIMIT: the
// default limit (badger.MemoryLimit) in the start's log and no
// warning that no memory limit is set. With GOMEMLIMIT set the user's
// limit is in force instead; with GOMEMLIMIT=off the store warns, as it
// should.
func TestFirstCommandMemoryLimit(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds ledgerd")
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops ledgerd with an interrupt, which Windows cannot send")
	}
	bin := built(t, ".")
	// --help names the default and how to override it.
	help, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("ledgerd --help: %v", err)
	}
	for _, want := range []string{"GOMEMLIMIT", fmt.Sprintf("Default when unset: %dMiB", badger.MemoryLimit>>20)} {
		if !strings.Contains(string(help), want) {
			t.Errorf("ledgerd --help does not say %q:\n%s", want, help)
		}
	}
	for _, tc := range []struct {
		env   string
		limit float64
		warns bool
	}{
		{"", badger.MemoryLimit, false},
		{"GOMEMLIMIT=", badger.MemoryLimit, false},
		{"GOMEMLIMIT=200MiB", 200 << 20, false},
		{"GOMEMLIMIT=off", 1<<63 - 1, true},
	} {
		cmd := exec.Command(bin, "--data", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMEMLIMIT=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		stdout, _ := cmd.StdoutPipe()
		var stderr apitest.LockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "export VKEY=") {
		}
		go io.Copy(io.Discard, stdout)
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		deadline.Stop()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.env, err, stderr.String())
		}
		warned := strings.Contains(stderr.String(), "no Go memory limit")
		if got := logRecord(t, &stderr, "ledgerd started")["go_memory_limit"]; warned != tc.warns || got != tc.limit {
			t.Errorf("env %q: warned %v, limit %v; want %v, %v\n%s", tc.env, warned, got, tc.warns, tc.limit, stderr.String())
		}
	}
}
