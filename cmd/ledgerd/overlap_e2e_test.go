package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonTokenOverlap runs the real ledgerd and "ledgerd token rotate":
// after rotate --overlap 1h and SIGHUP both tokens append, the old one
// counted in ledgerd_previous_token_requests_total and the reload's log
// naming the previous token's expiry (never a hash); after a plain
// rotate and SIGHUP only the newest token appends.
func TestDaemonTokenOverlap(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	d := startDaemon(t, bin, dir)
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	first := string(tokenBytes)
	url := "http://" + d.addr
	rotate := func(args ...string) (string, string) {
		t.Helper()
		return runLedgerd(t, bin, "", append([]string{"token", "rotate", "local", "--data", data}, args...)...)
	}
	metrics := func() string {
		_, b := apitest.GetBody(t, url+"/metrics")
		return string(b)
	}
	reloaded := func(n int) {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		apitest.WaitFor(t, "the reload", func() bool {
			return strings.Contains(metrics(), `ledgerd_config_reloads_total{result="ok"} `+strconv.FormatUint(uint64(n), 10)+"\n")
		})
	}

	second, stderr := rotate("--overlap", "1h")
	if !strings.Contains(stderr, "the old token stays valid beside the new one until ") {
		t.Errorf("rotate --overlap does not say until when:\n%s", stderr)
	}
	reloaded(1)
	for i, tok := range []string{first, second, first} {
		if code := apitest.AppendWith(t, url, tok, i+1); code != http.StatusCreated {
			t.Errorf("append %d during the overlap: %d, want 201", i+1, code)
		}
	}
	if m := metrics(); !strings.Contains(m, `ledgerd_previous_token_requests_total{mediator="local"} 2`+"\n") {
		t.Errorf("the metric does not count the old token's 2 appends:\n%s", m)
	}
	line := waitLogLine(t, d, "previous mediator tokens in force")
	if !strings.Contains(line, `"count":1`) || !strings.Contains(line, `"expires":"local=`) {
		t.Errorf("the reload's log line of previous tokens: %s", line)
	}

	third, stderr := rotate()
	if !strings.Contains(stderr, `the previous token of mediator "local", valid until `) {
		t.Errorf("a plain rotate does not say it drops the previous token:\n%s", stderr)
	}
	reloaded(2)
	for i, tok := range []string{first, second} {
		if code := apitest.AppendWith(t, url, tok, 10+i); code != http.StatusUnauthorized {
			t.Errorf("token %d after a plain rotate: %d, want 401", i+1, code)
		}
	}
	if code := apitest.AppendWith(t, url, third, 12); code != http.StatusCreated {
		t.Errorf("the newest token: %d, want 201", code)
	}
	if log := d.stderr.String(); strings.Contains(log, apitest.TokenHash(first)) || strings.Contains(log, apitest.TokenHash(second)) || strings.Contains(log, first) {
		t.Error("the log shows a token or a token's hash")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("ledgerd stopped: %v\n%s", err, d.stderr.String())
	}
}
