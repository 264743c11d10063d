package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cuttingProxy stands in front of a real ledgerd: it passes requests on,
// counts the bytes of each answer it sends, and cuts the next
// GET /v1/export answer short after cut bytes (the connection dropped),
// once.
type cuttingProxy struct {
	*httptest.Server
	cut   atomic.Int64 // 0: none
	stall atomic.Bool  // after the cut, hold the connection open instead of dropping it

	mu   sync.Mutex
	sent []sent
}

type sent struct {
	path, query string
	bytes       int
}

func newCuttingProxy(t *testing.T, upstream string) *cuttingProxy {
	p := &cuttingProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		limit := len(b)
		if r.URL.Path == "/v1/export" {
			if cut := int(p.cut.Swap(0)); cut > 0 && cut < limit {
				limit = cut
			}
		}
		p.mu.Lock()
		p.sent = append(p.sent, sent{r.URL.Path, r.URL.RawQuery, limit})
		p.mu.Unlock()
		w.WriteHeader(resp.StatusCode)
		w.Write(b[:limit])
		if limit < len(b) {
			w.(http.Flusher).Flush()
			if p.stall.Load() {
				<-r.Context().Done() // until the client gives up
			}
			panic(http.ErrAbortHandler) // the connection drops: no end of the chunked body
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// take returns the answers sent since the last call.
func (p *cuttingProxy) take() []sent {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sent
	p.sent = nil
	return s
}

// entryFrames returns the offsets of the entry frames of an export file.
func entryFrames(b []byte) []int {
	var at []int
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("\nentry "))
		if j < 0 {
			return at
		}
		at = append(at, i+j+1)
		i += j + 1
	}
}

// An interrupted export --out FILE leaves FILE.partial; the same command
// again keeps its entries, verified, asks ledgerd only for the rest, and
// writes exactly the bytes of a one-shot export, also when the log has
// grown in between (to the latest checkpoint, or to the same --end). A
// partial download that is not the start of the export asked for is
// refused, naming it and the entry, and kept; one whose joined file does
// not verify is removed.
func TestExportResume(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	d, token, err := startLedgerd(t.TempDir(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	dir := t.TempDir()
	key := "--key=" + d.VerifierKey()
	os.WriteFile(filepath.Join(dir, "mail.json"), []byte(`{"recipient":"dave@example.com","subject":"lunch","body":"at noon"}`), 0o600)
	code, body, stderr := ledgerctl(t, dir, token, "minimize", "--url", d.URL(), "--action", "send_email", "--principal", "agent:example-1", "mail.json")
	if code != exitOK {
		t.Fatal(stderr)
	}
	os.WriteFile(filepath.Join(dir, "request.json"), []byte(body), 0o600)
	// decide appends n decisions and waits for a checkpoint covering them.
	size := uint64(0)
	decide := func(t *testing.T, n int) {
		t.Helper()
		for range n {
			code, out, stderr := ledgerctl(t, dir, token, "decide", "--url", d.URL(), key, "--json", "request.json")
			if code != exitOK {
				t.Fatal(stderr)
			}
			var r struct{ Index uint64 }
			json.Unmarshal([]byte(out), &r)
			size = r.Index + 1
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			code, out, _ := ledgerctl(t, dir, "", "checkpoint", "--url", d.URL(), key, "--json")
			var cp struct {
				TreeSize uint64 `json:"tree_size"`
			}
			json.Unmarshal([]byte(out), &cp)
			if code == exitOK && cp.TreeSize == size {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no checkpoint of tree size %d within 10s", size)
			}
			time.Sleep(10 * time.Millisecond) // the checkpoint interval is 10 ms
		}
	}
	decide(t, 8)
	oneShot := func(t *testing.T, args ...string) []byte {
		t.Helper()
		os.Remove(filepath.Join(dir, "one-shot.ledger"))
		if code, _, stderr := ledgerctl(t, dir, "", append([]string{"export", "--url", d.URL(), key, "--out", "one-shot.ledger"}, args...)...); code != exitOK {
			t.Fatalf("the one-shot export: %s", stderr)
		}
		return mustRead(t, filepath.Join(dir, "one-shot.ledger"))
	}
	p := newCuttingProxy(t, d.URL())
	// interrupt runs export through the proxy, cut inside the entry frame
	// after the first keep ones, and returns the bytes those frames take.
	interrupt := func(t *testing.T, out string, keep int, whole []byte, args ...string) int {
		t.Helper()
		at := entryFrames(whole)
		p.cut.Store(int64(at[keep] + 10))
		code, stdout, stderr := ledgerctl(t, dir, "", append([]string{"export", "--url", p.URL, key, "--out", out}, args...)...)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, "the answer was cut short: unexpected EOF") || strings.Contains(stderr, "is ledgerd running") ||
			!strings.Contains(stderr, out+partialSuffix+" holds what arrived: the same command again resumes from it") {
			t.Fatalf("the cut export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, out)); err == nil {
			t.Fatalf("the cut export wrote %s", out)
		}
		p.take()
		return at[keep] - at[0]
	}
	resume := func(t *testing.T, out string, args ...string) (int, string, string) {
		t.Helper()
		return ledgerctl(t, dir, "", append([]string{"export", "--url", p.URL, key, "--out", out}, args...)...)
	}

	t.Run("the rest only", func(t *testing.T) {
		whole := oneShot(t)
		keptBytes := interrupt(t, "cut.ledger", 4, whole)
		code, stdout, stderr := resume(t, "cut.ledger")
		if code != exitOK || !strings.Contains(stdout, "  resumed: 4 entries kept from cut.ledger.partial, verified again; the rest downloaded\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if got := mustRead(t, filepath.Join(dir, "cut.ledger")); !bytes.Equal(got, whole) {
			t.Fatalf("the resumed export (%d bytes) differs from the one-shot one (%d bytes)", len(got), len(whole))
		}
		if _, err := os.Stat(filepath.Join(dir, "cut.ledger.partial")); err == nil {
			t.Error("cut.ledger.partial is left")
		}
		fetched, exports := 0, 0
		for _, s := range p.take() {
			fetched += s.bytes
			if s.path == "/v1/export" {
				exports++
				if !strings.Contains(s.query, "start=4&") {
					t.Errorf("the second run asked for %s, want start=4", s.query)
				}
			}
		}
		// The rest of the file, and at most the prev and left frames
		// (and the kept entries' policy set, fetched apart) again.
		t.Logf("the one-shot export: %d bytes; the kept entries: %d; the second run fetched %d", len(whole), keptBytes, fetched)
		if exports != 1 || fetched > len(whole)-keptBytes+512 {
			t.Errorf("the second run fetched %d bytes in %d exports; the file is %d bytes, %d of them kept", fetched, exports, len(whole), keptBytes)
		}
	})

	// Entry 0 publishes the policy set, entry 1 is the approvals'
	// configuration (version 4): the rest of [0, 2) names no set, so the
	// set comes from GET /v1/policies/{digest}.
	t.Run("a set only the kept entries name", func(t *testing.T) {
		whole := oneShot(t, "--end", "2")
		interrupt(t, "sets.ledger", 1, whole, "--end", "2")
		if code, _, stderr := resume(t, "sets.ledger", "--end", "2"); code != exitOK {
			t.Fatal(stderr)
		}
		if got := mustRead(t, filepath.Join(dir, "sets.ledger")); !bytes.Equal(got, whole) {
			t.Errorf("the resumed export (%d bytes) differs from the one-shot one (%d bytes)", len(got), len(whole))
		}
		fetched := false
		for _, s := range p.take() {
			fetched = fetched || strings.HasPrefix(s.path, "/v1/policies/sha256:")
		}
		if !fetched {
			t.Error("the set was not fetched from /v1/policies")
		}
	})

	// No more bytes: --timeout ends the run, and what arrived is kept.
	t.Run("--timeout", func(t *testing.T) {
		whole := oneShot(t)
		at := entryFrames(whole)
		p.cut.Store(int64(at[5] + 10))
		p.stall.Store(true)
		defer p.stall.Store(false)
		code, _, stderr := ledgerctl(t, dir, "", "export", "--url", p.URL, key, "--timeout", "2s", "--out", "slow.ledger")
		if code != exitFailed || !strings.Contains(stderr, "the answer was cut short: context deadline exceeded") ||
			!strings.Contains(stderr, "hint: slow.ledger.partial holds what arrived") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		code, stdout, stderr := resume(t, "slow.ledger")
		if code != exitOK || !strings.Contains(stdout, "resumed: 5 entries kept") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if got := mustRead(t, filepath.Join(dir, "slow.ledger")); !bytes.Equal(got, whole) {
			t.Errorf("the resumed export (%d bytes) differs from the one-shot one (%d bytes)", len(got), len(whole))
		}
	})

	t.Run("a growing log", func(t *testing.T) {
		whole := oneShot(t)
		interrupt(t, "latest.ledger", 3, whole)
		interrupt(t, "fixed.ledger", 3, whole, "--end", strconv.FormatUint(size-1, 10))
		end := size - 1
		decide(t, 2)
		if code, stdout, stderr := resume(t, "latest.ledger", "--json"); code != exitOK || !strings.Contains(stdout, `"resumed":3,`) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if got, want := mustRead(t, filepath.Join(dir, "latest.ledger")), oneShot(t); !bytes.Equal(got, want) {
			t.Errorf("to the latest checkpoint: the resumed export (%d bytes) differs from the one-shot one (%d bytes)", len(got), len(want))
		}
		if code, _, stderr := resume(t, "fixed.ledger", "--end", strconv.FormatUint(end, 10)); code != exitOK {
			t.Fatal(stderr)
		}
		if got, want := mustRead(t, filepath.Join(dir, "fixed.ledger")), oneShot(t, "--end", strconv.FormatUint(end, 10)); !bytes.Equal(got, want) {
			t.Errorf("to the same --end: the resumed export (%d bytes) differs from the one-shot one (%d bytes)", len(got), len(want))
		}
	})

	t.Run("refused", func(t *testing.T) {
		whole := oneShot(t)
		at := entryFrames(whole)
		interrupt(t, "bad.ledger", 4, whole)
		partialPath := filepath.Join(dir, "bad.ledger.partial")
		b := mustRead(t, partialPath)
		sig := at[2] + bytes.Index(whole[at[2]:], []byte(`"sig":"`)) + 7
		b[sig] ^= 1
		os.WriteFile(partialPath, b, 0o600)
		code, stdout, stderr := resume(t, "bad.ledger")
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, `the partial download bad.ledger.partial: entry 2: `) {
			t.Errorf("a tampered entry: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if got := mustRead(t, partialPath); !bytes.Equal(got, b) {
			t.Error("the refused partial download was changed")
		}

		interrupt(t, "range.ledger", 4, whole)
		code, stdout, stderr = resume(t, "range.ledger", "--start", "1")
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, `the partial download range.ledger.partial: it is of entries [0, `) {
			t.Errorf("another range: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}

		other := oneShot(t, "--start", "2")
		interrupt(t, "left.ledger", 3, other, "--start", "2")
		partialPath = filepath.Join(dir, "left.ledger.partial")
		b = mustRead(t, partialPath)
		left := bytes.Index(b, []byte("\nleft ")) + 1
		b[left+bytes.IndexByte(b[left:], '\n')+1] ^= 1
		os.WriteFile(partialPath, b, 0o600)
		code, stdout, stderr = resume(t, "left.ledger", "--start", "2")
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, "range-proof") || !strings.Contains(stderr, `left.ledger.partial was removed`) {
			t.Errorf("a tampered left frame: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		for _, name := range []string{"left.ledger", "left.ledger.partial", "bad.ledger"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s is left", name)
			}
		}
	})
}
