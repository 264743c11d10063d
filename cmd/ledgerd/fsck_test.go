package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/ptytest"
)

// fsckStore serves a new data directory, appends n entries over HTTP and
// stops ledgerd (which signs a final checkpoint), and returns the
// directory.
func fsckStore(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	url, token, stop := runServe(t, dir)
	appendOverHTTP(t, url, token, n)
	stop()
	return dir
}

// appendOverHTTP appends entries 0 to n-1 (appendBody) to the ledgerd at
// url, one request after another, each of which must be acknowledged.
func appendOverHTTP(t *testing.T, url, token string, n int) {
	t.Helper()
	for i := range n {
		req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendBody(i)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("append %d: HTTP %d", i, resp.StatusCode)
		}
	}
}

func runFsck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"fsck"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// ledgerd fsck: the summary of an undamaged store, with and without
// signatures, and no progress line where stderr is not a terminal;
// damage deep in the log, the frames cut short and the checkpoint file
// gone, each named with exit 1; bad usage.
func TestFsckCommand(t *testing.T) {
	dir := fsckStore(t, 600)
	t.Setenv(progress.Env, "now") // drawn at once, were stderr a terminal
	code, stdout, stderr := runFsck(t, "--data", dir)
	if code != 0 || !regexp.MustCompile(`^ledgerd: fsck: \S+ holds 600 entries, the latest signed checkpoint is for 600; no damage found `+
		`\(600 entries and \d+ tiles checked without entry signatures \(--signatures adds them\) in \S+, \d+ entries/s; \S+ in all\)\n$`).MatchString(stdout) {
		t.Fatalf("fsck of an undamaged store: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "ledgerd: fsck: checking the frames, the index and badger's tables of ") ||
		strings.Contains(stderr, " entries") || strings.ContainsAny(stderr, "\r\x1b") {
		t.Fatalf("a progress line on a stderr that is not a terminal, or no line saying what is checked: %q", stderr)
	}
	code, stdout, stderr = runFsck(t, "--data", dir, "--signatures")
	if code != 0 || !strings.Contains(stdout, "600 entries and") || !strings.Contains(stdout, "checked with every entry's signature") {
		t.Fatalf("fsck --signatures: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{{"--data", dir, "extra"}, {"--data", dir, "--max-damage", "0"}, {"--data", dir, "--online-nope"}} {
		if code, _, stderr := runFsck(t, args...); code != 2 || !strings.Contains(stderr, "Usage:") {
			t.Errorf("fsck %q: exit %d, %q; want 2 and the usage", args, code, stderr)
		}
	}

	damage := func(name string, change func(t *testing.T, dir string), want ...string) {
		t.Run(name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			// CopyFS makes files 0644; ledgerd refuses a key others can read.
			if err := os.Chmod(filepath.Join(d, "ledger.key"), 0o600); err != nil {
				t.Fatal(err)
			}
			change(t, d)
			code, stdout, stderr := runFsck(t, "--data", d)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 1", code, stdout, stderr)
			}
			for _, w := range want {
				if !strings.Contains(stderr, w) {
					t.Fatalf("stderr does not say %q: %s", w, stderr)
				}
			}
		})
	}
	frames := func(t *testing.T, d string) string {
		segments, _ := filepath.Glob(filepath.Join(d, "store", "frames", "0*.frames"))
		if len(segments) == 0 {
			t.Fatal("no frame segment")
		}
		return segments[0]
	}
	// Two entries changed: fsck goes on after the first.
	damage("entries", func(t *testing.T, d string) {
		segments, _ := filepath.Glob(filepath.Join(d, "store", "frames", "0*.frames"))
		for _, index := range []string{`"index":150,`, `"index":420,`} {
			found := false
			for _, seg := range segments {
				b, _ := os.ReadFile(seg)
				if at := bytes.Index(b, []byte(index)); at >= 0 {
					b[at+20] ^= 1
					os.WriteFile(seg, b, 0o600)
					found = true
				}
			}
			if !found {
				t.Fatalf("%s is in no segment", index)
			}
		}
	}, "ledgerd: damage: ", "entry 150", "the store does not open, so nothing else was checked")
	// Damage that opening does not read, which fsck finds and names, all
	// of it: entry 150's record in the locations file and a full tile.
	damage("locations and tiles", func(t *testing.T, d string) {
		for _, f := range []struct {
			path string
			at   int64
		}{{filepath.Join(d, "store", "locations"), 150*20 + 3}, {filepath.Join(d, "store", "tiles", "level-0"), 8196 + 100}} {
			b, err := os.ReadFile(f.path)
			if err != nil || int64(len(b)) <= f.at {
				t.Fatalf("%s: %d bytes, %v", f.path, len(b), err)
			}
			b[f.at] ^= 1
			if err := os.WriteFile(f.path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}, "ledgerd: damage: ", "entry 150", "tile", "problems found")
	damage("truncated", func(t *testing.T, d string) {
		// Cut in half what the segment holds of frames, not its size: the
		// segment may end in zeros written ahead of need, and half of it
		// cut only those where frames are small.
		seg := frames(t, d)
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(seg, int64(len(bytes.TrimRight(b, "\x00"))/2)); err != nil {
			t.Fatal(err)
		}
	}, "ledgerd: damage: ", "the store does not open")
	// The checkpoint file is the index's copy of the latest checkpoint:
	// without it the index still has it, and nothing is lost.
	d := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(d, "ledger.key"), 0o600)
	if err := os.Remove(filepath.Join(d, "store", "checkpoint")); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runFsck(t, "--data", d); code != 0 || !strings.Contains(stdout, "the latest signed checkpoint is for 600; no damage found") {
		t.Fatalf("fsck without the checkpoint file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// ledgerd fsck --online asks the ledgerd serving the data directory,
// which checks the log up to its latest checkpoint while appends go on;
// without a ledgerd it says so.
func TestFsckOnlineCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, stderr := runFsck(t, "--online", "--data", fsckStore(t, 1)); code != 1 || !strings.Contains(stderr, "ledgerd: error: fsck --online: no ledgerd serves ") ||
		!strings.Contains(stderr, "\nledgerd: hint: with ledgerd stopped, run ledgerd fsck without --online\n") {
		t.Fatalf("fsck --online without ledgerd: exit %d, %q", code, stderr)
	}
	url, token, _ := runServe(t, dir)
	st, err := os.Stat(filepath.Join(dir, "store", "fsck.sock"))
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("the fsck socket: %v, mode %v; want a socket of mode 0600", err, st.Mode())
	}
	stop := make(chan struct{})
	appended := make(chan int)
	go func() {
		n := 0
		defer func() { appended <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendBody(i)))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("append %d: HTTP %d", i, resp.StatusCode)
				return
			}
			n++
		}
	}()
	// A checkpoint of some entries.
	for deadline := time.Now().Add(30 * time.Second); !regexp.MustCompile(`\n[1-9]\d*\n`).MatchString(apitest.Get(t, url+"/v1/checkpoint")); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of an appended entry after 30 s")
		}
	}
	for round := range 3 {
		code, stdout, stderr := runFsck(t, "--online", "--data", dir, "--signatures")
		if code != 0 || !regexp.MustCompile(`^ledgerd: fsck: \S+ held \d+ entr(y|ies), checked online up to the signed checkpoint for [1-9]\d*; no damage found \(\d+ entr(y|ies) and \d+ tiles? checked with every entry's signature in`).MatchString(stdout) {
			t.Fatalf("round %d: fsck --online during appends: exit %d, stdout %q, stderr %q", round, code, stdout, stderr)
		}
	}
	// One at a time: while a client holds the check (this one sends no
	// request), another is refused.
	c, err := net.Dial("unix", filepath.Join(dir, "store", "fsck.sock"))
	if err != nil {
		t.Fatal(err)
	}
	apitest.WaitFor(t, "a second online fsck to be refused", func() bool {
		code, _, stderr := runFsck(t, "--online", "--data", dir)
		return code == 1 && strings.Contains(stderr, "an online fsck is running already: one at a time")
	})
	c.Close()
	apitest.WaitFor(t, "an online fsck after the first client left", func() bool {
		code, _, _ := runFsck(t, "--online", "--data", dir)
		return code == 0
	})
	close(stop)
	if n := <-appended; n == 0 {
		t.Fatal("nothing was appended")
	}
}

// ledgerd fsck with stderr a terminal draws a progress line for each part
// (LEDGER_PROGRESS=now: the check of 600 entries takes less than the
// second a line waits for) and erases it before the next; the summary
// goes to stdout as on a pipe.
func TestFsckProgress(t *testing.T) {
	dir := fsckStore(t, 600)
	t.Setenv(progress.Env, "now")
	t.Setenv("TERM", "xterm")
	pty := ptytest.Open(t)
	var stdout bytes.Buffer
	code := run(t.Context(), []string{"fsck", "--data", dir}, &stdout, pty.Terminal)
	out := string(pty.Output())
	if code != 0 || !strings.Contains(stdout.String(), "no damage found") {
		t.Fatalf("fsck: exit %d, stdout %q, terminal %q", code, stdout.String(), out)
	}
	for _, part := range []string{"the store's records", "the ledger's checks"} {
		line := regexp.MustCompile(`\rledgerd: fsck: ` + part + `: \d+ of 600 entries \(\d+%\)\x1b\[K`)
		if !line.MatchString(out) {
			t.Errorf("no progress line for %s on the terminal: %q", part, out)
		}
	}
	// Each part's line erased before what follows it: the line saying
	// the ledger's checks start, and the end.
	if !strings.HasSuffix(out, "\r\x1b[K") || strings.Count(out, "\r\x1b[K") != 2 {
		t.Errorf("the progress lines not erased once each: %q", out)
	}
}
