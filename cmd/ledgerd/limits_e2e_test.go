//go:build unix

package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
)

func buildLedgerd(t *testing.T) string {
	t.Helper()
	return built(t, ".")
}

// setConfig changes fields of the config file of the data directory that
// startDaemon made in dir.
func setConfig(t *testing.T, dir string, fields map[string]any) {
	t.Helper()
	path := filepath.Join(dir, "data", "ledgerd.json")
	var cfg map[string]any
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("reading the config: %v", err)
	}
	for k, v := range fields {
		cfg[k] = v
	}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonUnderIdleAndSlowClients runs the real ledgerd with a
// descriptor limit of 256 (so max_connections defaults to 192). First
// 2,000 idle keep-alive connections and 300 unauthenticated appends whose
// bodies never end: health checks and appends are still answered, every
// one of those connections is closed by the server (refusal before the
// body, newcomers taking idle connections' places), and ledgerd never runs
// out of descriptors. Then, below the cap, with no newcomer: 150 idle
// connections and 30 authenticated appends whose bodies never end are
// closed by idle_timeout and body_timeout alone.
func TestDaemonUnderIdleAndSlowClients(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd, and opens 2,300 connections")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 3000 {
		t.Skipf("the hard descriptor limit (%d) is too low for 2,300 client connections", lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	d := startDaemon(t, bin, dir) // makes the data directory and token
	d.cmd.Process.Kill()
	d.cmd.Wait()
	// Every connection comes from 127.0.0.1: a per-source cap of 192 (no
	// less than max_connections) leaves the cap of all connections to be
	// tested (conns_flood_test.go tests the per-source cap).
	setConfig(t, dir, map[string]any{"idle_timeout": "2s", "body_timeout": "3s", "max_connections_per_source": 192})
	d = startWrapped(t, bin, dir, map[string]string{"LEDGERD_TEST_NOFILE": "256"})
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	url := "http://" + d.addr
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	metric := func(names ...string) string {
		t.Helper()
		resp, err := client.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		return grepLines(string(m), names...)
	}

	// Phase 1: the flood, and health checks and appends meanwhile.
	open := attack(t, d.addr, map[string]int{apitest.Healthz: 2000, apitest.PartialAppend(""): 300})
	for i := range 5 {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := client.Get(url + path)
			if err != nil {
				t.Fatalf("GET %s under attack: %v", path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s under attack: %s", path, resp.Status)
			}
		}
		req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendBody(i)))
		req.Header.Set("Authorization", "Bearer "+string(token))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("append under attack: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("append under attack: %s", resp.Status)
		}
	}
	if got := open(); got != nil {
		t.Fatalf("still open 25 s after they were opened: %v", got)
	}

	// Phase 2: below the cap, only the deadlines close connections.
	reclaimed := metric("ledgerd_connections_reclaimed_total")
	open = attack(t, d.addr, map[string]int{apitest.Healthz: 150, apitest.PartialAppend("Bearer " + string(token)): 30})
	if got := open(); got != nil {
		t.Fatalf("still open 25 s after they were opened (idle_timeout 2s, body_timeout 3s): %v", got)
	}
	if now := metric("ledgerd_connections_reclaimed_total"); now != reclaimed {
		t.Errorf("connections were closed to make room below the cap: %s, then %s", reclaimed, now)
	}
	for _, bad := range []string{"too many open files", "panic"} {
		if strings.Contains(d.stderr.String(), bad) {
			t.Errorf("ledgerd's log has %q", bad)
		}
	}
	t.Logf("metrics:\n%s", metric("ledgerd_connections_", "ledgerd_rejects_total"))
}

// attack opens, for each request text, that many connections that send
// it and then nothing more. The function it returns waits for the server
// to close them all and returns, by request, how many were still open 25 s
// after they were opened, or nil; it logs how many were answered first.
func attack(t *testing.T, addr string, requests map[string]int) func() map[string]int {
	t.Helper()
	type result struct {
		request          string
		closed, answered bool
	}
	done := make(chan result)
	total := 0
	for text, n := range requests {
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", total, err)
			}
			total++
			io.WriteString(c, text)
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(25 * time.Second))
				var got []byte
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					got = append(got, buf[:n]...)
					if err != nil {
						done <- result{text, !os.IsTimeout(err), strings.HasPrefix(string(got), "HTTP/1.1 ")}
						return
					}
				}
			}()
		}
	}
	return func() map[string]int {
		t.Helper()
		open, answered := map[string]int{}, map[string]int{}
		for range total {
			r := <-done
			if !r.closed {
				open[r.request]++
			}
			if r.answered {
				answered[r.request]++
			}
		}
		for text, n := range requests {
			t.Logf("%d of %d connections sending %.30q answered before the server closed them", answered[text], n, text)
		}
		if len(open) == 0 {
			return nil
		}
		return open
	}
}

func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestStoreFilesOwnerOnly runs ledgerd under a umask of 000, appends, stops
// it, and finds no file or directory of its data directory open to group
// or others.
func TestStoreFilesOwnerOnly(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	d := startWrapped(t, bin, dir, map[string]string{"LEDGERD_TEST_UMASK": "000"})
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	req, _ := http.NewRequest("POST", "http://"+d.addr+"/v1/entries", strings.NewReader(apitest.AppendBody(1)))
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("append: %s", resp.Status)
	}
	d.cmd.Process.Signal(os.Interrupt)
	stopped := make(chan error, 1)
	go func() { stopped <- d.cmd.Wait() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("ledgerd: %v\n%s", err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ledgerd did not stop on SIGINT")
	}
	files := 0
	err = filepath.WalkDir(filepath.Join(dir, "data"), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			rel, _ := filepath.Rel(dir, path)
			t.Errorf("%s has mode %v under umask 000", rel, perm)
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("only %d files and directories in the data directory", files)
	}
	t.Logf("%d files and directories checked", files)
}
