package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// These tests damage a store as a disk or an operator may, and run the
// ledgerd binary on it: it must answer damage as damage (500, counted),
// refuse to start from a state it cannot continue safely, and fsck must
// say what it found and what it repaired.

// servedDataDir starts the ledgerd binary bin once on a new data
// directory in dir (dir/data), which makes it, and stops it.
func servedDataDir(t *testing.T, bin, dir string) string {
	t.Helper()
	d := startDaemon(t, bin, dir)
	stopDaemon(t, d)
	if d.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("ledgerd did not stop cleanly:\n%s", d.stderr)
	}
	return filepath.Join(dir, "data")
}

// fillStore appends n entries (appendBody) to the stopped ledgerd's data
// directory data, in this process, through the ledger ledgerd opens: the
// quick way to a store of thousands of entries. The ledger signs a
// checkpoint when it closes.
func fillStore(t *testing.T, data string, from, n int) {
	t.Helper()
	cfg, err := config.Load(filepath.Join(data, configName))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	store, err := badger.Open(t.Context(), cfg.StoreDir, badger.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	for range 64 { // enough to fill group commits
		wg.Go(func() {
			for i := range next {
				if _, err := l.Append(t.Context(), apitest.Record(t, apitest.AppendBody(i))); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < from+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// httpGet returns the status and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runBinary runs bin with args and returns its exit status, stdout and
// stderr; it fails t if bin does not exit within a minute.
func runBinary(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// A tile slot of the tree zeroed in tiles/level-0 (issue 23): ledgerd
// starts (the slot is below the tree's right edge, which a start reads),
// but every read that needs the tile answers 500 internal naming damage,
// never 404 "no such entry", and counts it in ledgerd_store_damage_total;
// the entry itself is still served. fsck names the tile as missing, with
// exit 1.
func TestZeroedTileSlotIsDamage(t *testing.T) {
	bin := clusterLedgerd(t)
	dir := t.TempDir()
	data := servedDataDir(t, bin, dir)
	fillStore(t, data, 0, 5300) // full level-0 tiles 0 to 19
	path := filepath.Join(data, "store", "tiles", "level-0")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const slot = ledger.TileWidth*ledger.HashSize + 4
	if _, err := f.WriteAt(make([]byte, slot), 19*slot); err != nil { // entries 4864 to 5119
		t.Fatal(err)
	}
	f.Close()

	d := startDaemon(t, bin, dir)
	url := "http://" + d.addr
	if code, body := httpGet(t, url+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, e := httpGet(t, url+"/v1/entries/5000")
	if code != 200 {
		t.Fatalf("/v1/entries/5000: %d %s; want the entry, which is undamaged", code, e)
	}
	leaf := sha256.Sum256(append([]byte{0}, e...))
	for _, path := range []string{"/v1/inclusion?index=5000", "/v1/inclusion?leaf_hash=" + hex.EncodeToString(leaf[:]), "/v1/proofs/5000", "/tile/0/019"} {
		code, body := httpGet(t, url+path)
		var answer struct{ Error apitest.APIError }
		json.Unmarshal([]byte(body), &answer)
		if code != 500 || answer.Error.Code != "internal" || !strings.Contains(answer.Error.Message, "the store is damaged") {
			t.Errorf("GET %s with tile 0/19 zeroed: %d %s; want 500 internal, the store is damaged", path, code, body)
		}
	}
	if code, _ := httpGet(t, url+"/tile/0/018"); code != 200 {
		t.Errorf("GET /tile/0/018, undamaged: %d", code)
	}
	if _, m := httpGet(t, url+"/metrics"); !strings.Contains(m, "\nledgerd_store_damage_total 4\n") {
		t.Errorf("/metrics does not count the 4 requests that met damage:\n%s", m)
	}
	stopDaemon(t, d)
	if n := strings.Count(d.stderr.String(), "the store is damaged: a request found it"); n != 1 {
		t.Errorf("ledgerd logged the damage %d times, want once:\n%s", n, d.stderr)
	}

	code, stdout, stderr := runBinary(t, bin, "fsck", "--data", data)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "tile 0/19 of the tree of 5300 entries is missing") ||
		!regexp.MustCompile(`(?m)^ledgerd: damage: ledger: store is corrupt: tile 0/19: `).MatchString(stderr) || strings.Contains(stderr, "not found") {
		t.Fatalf("fsck with tile 0/19 zeroed: exit %d, stdout %q, stderr %s; want exit 1 naming tile 0/19 missing, never \"not found\"", code, stdout, stderr)
	}
}

// An entry's location record zeroed in the store's locations file (issue
// 29): ledgerd starts (the record is below the tree's right edge), but a
// read of the entry answers 500 internal naming damage, never 404, and
// its neighbours are served; fsck names the entry, with exit 1.
func TestZeroedLocationIsDamage(t *testing.T) {
	bin := clusterLedgerd(t)
	dir := t.TempDir()
	data := servedDataDir(t, bin, dir)
	fillStore(t, data, 0, 4200)
	// Served once, so that it starts from its approval snapshot (written
	// by an open that read 4,096 entries or more), not by reading every
	// entry, which the damaged one would stop, naming it.
	stopDaemon(t, startDaemon(t, bin, dir))
	f, err := os.OpenFile(filepath.Join(data, "store", "locations"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const record = 20 // bytes per entry
	if _, err := f.WriteAt(make([]byte, record), 100*record); err != nil {
		t.Fatal(err)
	}
	f.Close()

	d := startDaemon(t, bin, dir)
	url := "http://" + d.addr
	if code, body := httpGet(t, url+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, body := httpGet(t, url+"/v1/entries/100")
	var answer struct{ Error apitest.APIError }
	json.Unmarshal([]byte(body), &answer)
	if code != 500 || answer.Error.Code != "internal" || !strings.Contains(answer.Error.Message, "the store is damaged") {
		t.Errorf("GET /v1/entries/100 with its location zeroed: %d %s; want 500 internal, the store is damaged", code, body)
	}
	for _, path := range []string{"/v1/entries/99", "/v1/entries/101"} {
		if code, body := httpGet(t, url+path); code != 200 {
			t.Errorf("GET %s, undamaged: %d %s", path, code, body)
		}
	}
	stopDaemon(t, d)

	code, stdout, stderr := runBinary(t, bin, "fsck", "--data", data)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "entry 100's location is missing") || strings.Contains(stderr, "not found") {
		t.Fatalf("fsck with entry 100's location zeroed: exit %d, stdout %q, stderr %s; want exit 1 naming entry 100, never \"not found\"", code, stdout, stderr)
	}
}

// A store whose entries outlived every copy of its latest checkpoint (the
// checkpoint history and the checkpoint file lost, issue 23): ledgerd refuses to start,
// naming the state and the remedy, rather than sign a tree that may be
// smaller than one it signed and fork the log; fsck calls it damage. The
// checkpoint file alone lost is rebuilt from the checkpoint history, with
// a warning.
func TestStartRefusesLostCheckpoint(t *testing.T) {
	bin := clusterLedgerd(t)
	dir := t.TempDir()
	data := servedDataDir(t, bin, dir)
	fillStore(t, data, 0, 300)

	t.Run("every copy lost", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		copyTree(t, filepath.Join(dir, "data"), data)
		store := filepath.Join(data, "store")
		for _, lost := range []string{"index", "checkpoints", "checkpoint"} {
			if err := os.RemoveAll(filepath.Join(store, lost)); err != nil {
				t.Fatal(err)
			}
		}
		code, stdout, stderr := runBinary(t, bin, "serve", "--data", data, "--listen", "127.0.0.1:0")
		for _, want := range []string{
			"ledgerd: error: ", "the store holds 300 entries but no signed checkpoint", "its latest checkpoint was lost",
			"restore the store, or at least its latest checkpoint, from a backup",
			"ledgerd: hint: ledgerd fsck --config ",
		} {
			if code != 1 || !strings.Contains(stderr, want) {
				t.Fatalf("serve without any copy of the latest checkpoint: exit %d, stdout %q, stderr %s; want exit 1 saying %q", code, stdout, stderr, want)
			}
		}
		if _, err := os.Stat(filepath.Join(store, "checkpoint")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused start made a checkpoint file: %v", err)
		}
		code, stdout, stderr = runBinary(t, bin, "fsck", "--data", data)
		if code != 1 || !strings.Contains(stderr, "holds 300 entries but no signed checkpoint") {
			t.Fatalf("fsck without any copy of the latest checkpoint: exit %d, stdout %q, stderr %s", code, stdout, stderr)
		}
	})
	t.Run("checkpoint file lost", func(t *testing.T) {
		store := filepath.Join(data, "store")
		if err := os.Remove(filepath.Join(store, "checkpoint")); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, bin, dir)
		stopDaemon(t, d)
		if !strings.Contains(d.stderr.String(), "rebuilt the checkpoint file from the checkpoint history's latest signed checkpoint") {
			t.Fatalf("ledgerd rebuilt the checkpoint file without a warning:\n%s", d.stderr)
		}
		if _, err := os.Stat(filepath.Join(store, "checkpoint")); err != nil {
			t.Fatalf("the checkpoint file was not rebuilt: %v", err)
		}
	})
}

// fsck opens the store as serve does, which erases a frame whose write a
// crash cut short: it says so, and then that it found no damage (a torn
// write is not damage: it was never acknowledged), exit 0.
func TestFsckSaysWhatItRepaired(t *testing.T) {
	bin := clusterLedgerd(t)
	dir := t.TempDir()
	data := servedDataDir(t, bin, dir)
	fillStore(t, data, 0, 300)
	store := filepath.Join(data, "store")
	segments, _ := filepath.Glob(filepath.Join(store, "frames", "*.frames"))
	if len(segments) != 1 {
		t.Fatalf("frames/ holds %v; the test needs one segment", segments)
	}
	before, err := os.ReadFile(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	// Keep everything but the frames, append one more entry, then put the
	// rest back and cut the new frame in half: a crash during its write,
	// before it was acknowledged.
	saved := filepath.Join(dir, "saved")
	if err := os.Mkdir(saved, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := []string{"index", "checkpoints", "checkpoint", "approvals"}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(store, name)); err == nil {
			copyTree(t, filepath.Join(store, name), filepath.Join(saved, name))
		}
	}
	fillStore(t, data, 300, 1)
	after, err := os.ReadFile(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	for at < len(before) && before[at] == after[at] {
		at++
	}
	end := len(bytes.TrimRight(after, "\x00"))
	if at >= end {
		t.Fatal("the appended entry's frame is not in the segment")
	}
	torn := append(after[:at+(end-at)/2:at+(end-at)/2], make([]byte, len(after)-(at+(end-at)/2))...)
	if err := os.WriteFile(segments[0], torn, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range kept {
		if err := os.RemoveAll(filepath.Join(store, name)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(saved, name)); err == nil {
			copyTree(t, filepath.Join(saved, name), filepath.Join(store, name))
		}
	}

	code, stdout, stderr := runBinary(t, bin, "fsck", "--data", data)
	if code != 0 || !regexp.MustCompile(`(?m)^ledgerd: fsck: repaired when the store was opened \(as serve would\): erased the last \d+ bytes of the frame log, `+
		`a frame whose write a crash cut short \(never acknowledged\)\nledgerd: fsck: \S+ holds 300 entries, the latest signed checkpoint is for 300; no damage found after the repairs above `).MatchString(stdout) {
		t.Fatalf("fsck after a torn write: exit %d, stdout %q, stderr %s; want the repair, then no damage, exit 0", code, stdout, stderr)
	}
	code, stdout, stderr = runBinary(t, bin, "fsck", "--data", data)
	if code != 0 || strings.Contains(stdout, "repaired") || !strings.Contains(stdout, "no damage found (") {
		t.Fatalf("fsck again: exit %d, stdout %q, stderr %s; want no repair, no damage", code, stdout, stderr)
	}
}

// copyTree copies the file or directory src to dst, modes kept.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	info, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if !info.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	// CopyFS makes files 0644; ledgerd refuses a key others can read.
	if key := filepath.Join(dst, "ledger.key"); fileExists(key) {
		if err := os.Chmod(key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
