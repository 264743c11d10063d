package badger_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// treeState records every path under dir with its mode, size and bytes.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			v += string(b)
		}
		state[path] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// waitForSpare waits until the open store has written its spare segment
// whole, and returns its path.
func (f *frameStore) waitForSpare() string {
	f.t.Helper()
	spare := filepath.Join(f.dir, "frames", "spare.frames.tmp")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if info, err := os.Stat(spare); err == nil && info.Size() == f.opts.SegmentSize {
			return spare
		}
		if time.Now().After(deadline) {
			f.t.Fatal("no spare segment was written")
		}
	}
}

// A second open of a store that is open is refused before it opens,
// creates, renames or removes anything; the first goes on, and after it
// closes the store opens again. (cmd/ledgerd tests the same across two
// processes.)
func TestBadgerLocked(t *testing.T) {
	f := newFrameStore(t)
	f.commit(1)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Wait for the spare segment: the file a second opener used to
	// delete and recreate.
	f.waitForSpare()
	time.Sleep(50 * time.Millisecond) // its last sync
	before := treeState(t, f.dir)
	second, err := f.open()
	if err == nil {
		second.Close()
		t.Fatal("a second open of an open store succeeded")
	}
	if after := treeState(t, f.dir); len(after) != len(before) {
		t.Fatalf("the refused open changed the files: %d paths before, %d after", len(before), len(after))
	} else {
		for path, v := range before {
			if after[path] != v {
				t.Fatalf("the refused open changed %s", path)
			}
		}
	}
	if !strings.Contains(err.Error(), "open in another process") {
		t.Fatalf("second open: %v; want it to say the store is open elsewhere", err)
	}
	// The first store goes on across a segment boundary, into its spare.
	for range 20 {
		b := testBatch(uint64(100*len(f.batches)), 100)
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		f.batches = append(f.batches, b)
	}
	if n := len(f.segments()); n < 2 {
		t.Fatalf("%d segments; the test needs a boundary", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.check() // the lock is released at Close
}

// The spare segment becomes a segment only if it is still the file this
// process wrote: a file put at its path by anything else is refused, and
// nothing acknowledged is lost.
func TestBadgerSpareReplaced(t *testing.T) {
	f := newFrameStore(t)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	spare := f.waitForSpare()
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spare, make([]byte, f.opts.SegmentSize), 0o600); err != nil {
		t.Fatal(err)
	}
	var commitErr error
	for range 20 {
		b := testBatch(uint64(100*len(f.batches)), 100)
		if commitErr = s.Commit(t.Context(), b); commitErr != nil {
			break
		}
		f.batches = append(f.batches, b)
	}
	if commitErr == nil || !strings.Contains(commitErr.Error(), "not the one this process wrote") {
		t.Fatalf("Commit across the segment boundary = %v; want a refusal of the replaced spare", commitErr)
	}
	s.Close()
	f.check()
}

// The latest signed checkpoint outlives the index: rebuilt from the
// frames, the store still has it, and refuses a tree smaller than it.
func TestBadgerCheckpointFile(t *testing.T) {
	t.Run("index deleted", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 300
		f.commit(4)
		if err := os.RemoveAll(filepath.Join(f.dir, "index")); err != nil {
			t.Fatal(err)
		}
		f.check()
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, err := s.State(t.Context())
		if err != nil || st.CheckpointSize != 300 || !bytes.Equal(st.Checkpoint, testCheckpoint(300)) {
			t.Fatalf("State = %+v, %v; want the checkpoint for 300", st, err)
		}
		if cp, err := s.Checkpoint(t.Context(), 300); err != nil || !bytes.Equal(cp, testCheckpoint(300)) {
			t.Fatalf("Checkpoint(300) = %q, %v", cp, err)
		}
		if err := s.AddCheckpoint(t.Context(), 300, testCheckpoint(300)); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("AddCheckpoint(300) again = %v; want ErrConflict", err)
		}
	})
	t.Run("index deleted and the last frame lost", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 300
		f.commit(3)
		f.commit(1) // entries 300-399, after the checkpoint
		if err := os.RemoveAll(filepath.Join(f.dir, "index")); err != nil {
			t.Fatal(err)
		}
		// Lose the frames of entries 200 to 399: the one the checkpoint
		// covers too.
		seg := f.segments()[0]
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		clear(b[frameStart(t, b, 2):])
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = f.open()
		wantCorrupt(t, err, "the frame log holds 200 entries, but a checkpoint for a tree of 300 was signed")
	})
	t.Run("damaged checkpoint file", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 100
		f.commit(1)
		path := filepath.Join(f.dir, "checkpoint")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-3] ^= 1
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = f.open()
		wantCorrupt(t, err, "fails its checksum")
	})
}

// frameStart returns the offset of frame k in a segment's bytes b.
func frameStart(t *testing.T, b []byte, k int) int {
	t.Helper()
	at := 0
	for range k {
		if at+8 > len(b) {
			t.Fatalf("segment of %d bytes has fewer than %d frames", len(b), k+1)
		}
		at += 8 + int(binary.BigEndian.Uint32(b[at:]))
	}
	return at
}

// Below the free-space reserve a commit is refused, writing nothing, and
// no spare segment is written: badger's mapped files must never meet a
// full disk.
func TestBadgerReserve(t *testing.T) {
	f := newFrameStore(t)
	f.commit(1)
	f.opts.ReserveBytes = 1 << 60
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	err = s.Commit(t.Context(), testBatch(100, 100))
	if !errors.Is(err, badger.ErrNoSpace) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("Commit under the reserve = %v; want ErrNoSpace", err)
	}
	// Checkpoints still go through: the reserve is kept for them.
	if err := s.AddCheckpoint(t.Context(), 100, testCheckpoint(100)); err != nil {
		t.Fatalf("AddCheckpoint under the reserve = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "frames", "spare.frames.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a spare segment was written under the reserve (%v)", err)
	}
	f.opts.ReserveBytes = 0
	f.check()
}

// Every file and directory of a store is its owner's alone, however the
// directory was made: badger creates its files 0666 less the umask.
func TestBadgerOwnerOnly(t *testing.T) {
	f := newFrameStore(t)
	if err := os.Chmod(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.checkpointAt = 100
	f.commit(1)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = filepath.WalkDir(f.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Below the floor of free space (half the reserve, at most 64 MiB) the
// store writes nothing to badger, whose mapped files fault on a full
// disk: the indexer waits for space while reads find the frames it has
// not indexed, checkpoints and opens are refused, and Close leaves badger
// for the next open to recover from the frame log. The free space is made
// up here (TestDiskFilledByAnother, in cmd/ledgerd, fills a real one).
func TestBadgerIndexFloor(t *testing.T) {
	const plenty, little = 1 << 40, 1 << 20
	var highAnswers atomic.Int64 // then little
	highAnswers.Store(math.MaxInt64)
	badger.SetFreeSpace(t, func() uint64 {
		if highAnswers.Add(-1) >= 0 {
			return plenty
		}
		return little
	})
	logs := &recordLog{}
	f := newFrameStore(t)
	f.opts.Logger = slog.New(&recordingHandler{log: logs})
	f.commit(2)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	badger.WaitForSpare(s)
	logged := func(msg string) int {
		n := 0
		for _, r := range logs.all() {
			if r.msg == msg {
				n++
			}
		}
		return n
	}
	waitLogged := func(msg string, n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); logged(msg) < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line %q", msg)
			}
		}
	}
	// A commit sees the reserve free, then the file system fills.
	commit := func() {
		t.Helper()
		highAnswers.Store(1)
		b := testBatch(uint64(100*len(f.batches)), 100)
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		f.batches = append(f.batches, b)
	}
	const paused = "ledger: indexing paused until there is space: the frame log holds the entries not yet indexed"
	commit()
	waitLogged(paused, 1)
	if e, err := s.Entry(t.Context(), 250); err != nil || !bytes.Equal(e, f.batches[2].Entries[50]) {
		t.Fatalf("Entry(250) while indexing waits = %v; want the entry committed", err)
	}
	err = s.AddCheckpoint(t.Context(), 300, testCheckpoint(300))
	if !errors.Is(err, badger.ErrNoSpace) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("AddCheckpoint below the floor = %v; want ErrNoSpace", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "checkpoint")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AddCheckpoint below the floor wrote the checkpoint file (%v)", err)
	}
	// Space again: indexing resumes, and checkpoints are signed.
	highAnswers.Store(math.MaxInt64)
	waitLogged("ledger: indexing resumed", 1)
	badger.WaitMerges(s)
	if err := s.AddCheckpoint(t.Context(), 300, testCheckpoint(300)); err != nil {
		t.Fatal(err)
	}
	// Full again, and closed: badger is neither written nor closed.
	commit()
	waitLogged(paused, 2)
	err = s.Close()
	if !errors.Is(err, badger.ErrNoSpace) || !strings.Contains(err.Error(), "recover from the frame log") {
		t.Fatalf("Close below the floor = %v; want ErrNoSpace", err)
	}
	if _, err := f.open(); !errors.Is(err, badger.ErrNoSpace) || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("Open below the floor = %v; want ErrNoSpace", err)
	}
	if err := badger.CloseIndex(s); err != nil {
		t.Fatal(err)
	}
	highAnswers.Store(math.MaxInt64)
	f.check()
}
