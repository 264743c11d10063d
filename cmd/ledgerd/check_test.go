package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runServe runs "ledgerd serve" in this process on dir until the test
// ends or stop is called, and returns its URL and mediator token.
func runServe(t *testing.T, dir string) (url, token string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, `mediator "local" token (shown once, stored only as a hash): `); ok {
			token = rest
		}
		if _, addr, ok := strings.Cut(line, " on http://"); ok && strings.HasPrefix(line, "ledgerd: serving") {
			url = "http://" + addr
			break
		}
	}
	go io.Copy(io.Discard, r)
	if url == "" {
		cancel()
		t.Fatalf("ledgerd serve did not start (exit %d)", <-done)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("ledgerd serve exited %d", code)
			}
		}
	}
	t.Cleanup(stop)
	return url, token, stop
}

// runCheck runs "ledgerd check" on dir and returns its exit status and
// output.
func runCheck(t *testing.T, dir string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"check", "--data", dir}, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// ledgerd check refuses a store a ledgerd has open, finds nothing in an
// undamaged one, and names damage that starting ledgerd does not read.
func TestCheckCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	url, token, stop := runServe(t, dir)
	appendOverHTTP(t, url, token, 300)
	if code, _, stderr := runCheck(t, dir); code != 1 || !strings.Contains(stderr, "open in another process") {
		t.Fatalf("check beside a running ledgerd: exit %d, %q; want 1 and the lock named", code, stderr)
	}
	stop() // signs a final checkpoint
	code, stdout, stderr := runCheck(t, dir)
	if code != 0 || !strings.Contains(stdout, "holds 300 entries, the latest signed checkpoint is for 300; no damage found") {
		t.Fatalf("check of an undamaged store: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// One byte of entry 150, in a frame the index records: opening the
	// store does not read it, the check does.
	segments, _ := filepath.Glob(filepath.Join(dir, "store", "frames", "*.frames"))
	b, err := os.ReadFile(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte(`"index":150,`))
	if at < 0 {
		t.Fatal("entry 150 is not in the first segment")
	}
	b[at+20] ^= 1
	if err := os.WriteFile(segments[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCheck(t, dir)
	if code != 1 || !strings.Contains(stderr, "store is corrupt") || !strings.Contains(stderr, "150") {
		t.Fatalf("check of a damaged store: exit %d, %q; want 1 naming entry 150", code, stderr)
	}
}
