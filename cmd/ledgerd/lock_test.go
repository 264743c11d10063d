package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// bigAppendBody is an append of about 30 KiB of attributes, so that a few
// thousand appends cross several 64 MiB segments of the frame log.
func bigAppendBody(i int) string {
	c, _ := commit.Params(fmt.Appendf(nil, `{"to":"user%d@example.com","amount_minor":%d}`, i, i))
	tiers := commit.Digest(sha256.Sum256([]byte("tiers")))
	return fmt.Sprintf(`{"principal":"agent-1","action":"make_payment","decision":"allow","policies":["payments.limit"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":{"amount_minor":%d,"note":"%s"}}`,
		c.Digest, c.Size, tiers, i, strings.Repeat(fmt.Sprintf("%08d", i), 3800))
}

// fileSums returns every path under dir with its mode and, for a regular
// file, the SHA-256 of its bytes (the running ledgerd's fsck.sock is a
// socket: its mode is compared, it has no bytes to read).
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		sums[path] = sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// A second ledgerd on the data directory of a running one is refused and
// changes nothing; the first then takes appends past two segment
// boundaries, stops, and every entry it acknowledged is served and
// verifies offline.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries, and writes about 200 MiB")
	}
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := t.TempDir()
	first := startDaemon(t, ledgerd, dir)
	defer func() { first.cmd.Process.Kill(); first.cmd.Wait() }()
	store := filepath.Join(dir, "data", "store")

	// The spare segment, ready (a new log's first segment is 1 MiB): the
	// file a second process used to delete and recreate under the first
	// one.
	spare := filepath.Join(store, "frames", "spare.frames.tmp")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, err := os.Stat(spare); err == nil && info.Size() == 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first ledgerd wrote no spare segment")
		}
	}
	// Its last write: the files stop changing (a checkpoint may follow
	// the spare segment).
	before := fileSums(t, store)
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(100 * time.Millisecond)
		now := fileSums(t, store)
		if maps.Equal(now, before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first ledgerd's files still change after 30 s")
		}
		before = now
	}

	second := exec.Command(ledgerd, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	var stderr bytes.Buffer
	second.Stderr = &stderr
	done := make(chan error, 1)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a second ledgerd on the same data directory started")
		}
	case <-time.After(30 * time.Second):
		second.Process.Kill()
		t.Fatal("a second ledgerd on the same data directory is still running")
	}
	if !strings.Contains(stderr.String(), "open in another process") {
		t.Errorf("the second ledgerd said %q; want it to name the lock", stderr.String())
	}
	after := fileSums(t, store)
	for path, sum := range before {
		if after[path] != sum {
			t.Fatalf("the refused ledgerd changed %s", path)
		}
	}
	if len(after) != len(before) {
		t.Fatalf("the refused ledgerd left %d paths where there were %d", len(after), len(before))
	}

	// Load the first past segment boundaries, up to segments of 64 MiB
	// (they start at 1 MiB and grow with the log).
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	url := "http://" + first.addr
	const n = 4800
	var mu sync.Mutex
	acked := map[uint64]string{}
	var failures []string
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(bigAppendBody(i)))
				req.Header.Set("Authorization", "Bearer "+string(token))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				var r struct {
					Index uint64          `json:"index"`
					Entry json.RawMessage `json:"entry"`
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				if err := json.Unmarshal(body, &r); resp.StatusCode != http.StatusCreated || err != nil {
					failures = append(failures, fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body))
				} else {
					acked[r.Index] = string(r.Entry)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d appends failed, first: %s", len(failures), failures[0])
	}
	segments, _ := filepath.Glob(filepath.Join(store, "frames", "*.frames"))
	if len(segments) < 3 {
		t.Fatalf("%d segments after %d appends; the test needs two boundaries", len(segments), n)
	}

	// Stop it as an operator would, start it again, and check everything
	// it acknowledged.
	first.cmd.Process.Signal(syscall.SIGTERM)
	if err := first.cmd.Wait(); err != nil {
		t.Fatalf("ledgerd stopped with %v", err)
	}
	again := startDaemon(t, ledgerd, dir)
	defer func() { again.cmd.Process.Kill(); again.cmd.Wait() }()
	url = "http://" + again.addr
	checkServed(t, url, acked)
	out := exportAndVerify(t, ledgerVerify, url, again.vkey, n)
	t.Logf("%d appends over %d segments; %s", len(acked), len(segments), out)
}
