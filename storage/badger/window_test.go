package badger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// The windows of the leaf-hash and idempotency-key indexes, the records
// of the entries after their runs, are held in memory (window.go) and
// rebuilt at Open from the frame log. These tests use runs of 250 or 100
// entries.

// After a close, and after crashes that roll badger's index back to
// before the latest frames (it is written without a sync) or lose it,
// Open finds every leaf hash and key of the window, and badger holds
// none of them.
func TestBadgerWindowAfterCrash(t *testing.T) {
	badger.SetRunSize(t, 250)
	t.Run("close", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(4) // a run [0, 250), the window [250, 400)
		f.check()
		f.commit(1)
		f.check()
		if n := leafKeys(t, f.dir); n != 0 {
			t.Fatalf("badger holds %d leaf hashes; want none", n)
		}
		if n := len(keyIndices(t, f.dir)); n != 0 {
			t.Fatalf("badger holds %d idempotency keys; want none", n)
		}
	})
	// Badger keeps the run mark of [0, 250) and the index of the frames
	// up to 400; the frames of [250, 400), indexed, are read again for
	// the window, those after for the index too.
	t.Run("index rolled back after a run", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(4)
		restore := f.snapshotIndex()
		f.commit(2) // a run [250, 500) written, the window [500, 600)
		restore()
		f.check()
		f.check()
	})
	// Badger lost the run mark as well as the frames' index: the run
	// files, synced before the mark was written, reach further than the
	// index, and the frames are read from the first.
	t.Run("index rolled back before a run", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(2)
		restore := f.snapshotIndex()
		f.commit(4) // runs [0, 250) and [250, 500)
		restore()
		f.check()
	})
	t.Run("index lost", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(6)
		if err := os.RemoveAll(filepath.Join(f.dir, "index")); err != nil {
			t.Fatal(err)
		}
		f.check()
	})
}

// A crash after badger indexed the frame that brought the window to a
// run's worth of entries, but before the run was written: Open writes it,
// and lookups are exact. The mark left by the crash names where the
// frames of the window start.
func TestBadgerWindowRunAtOpen(t *testing.T) {
	badger.SetRunSize(t, 100)
	badger.SetMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	every := func(uint64) bool { return true }
	batches := keyedStore(t, s, 0, 5, every) // runs [0, 100), [100, 200), the window [200, 250)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs, keys := leafRuns(t, dir), keyRuns(t, dir)
	if err := badger.RollBackRuns(dir, 100); err != nil {
		t.Fatal(err)
	}
	if got := leafRuns(t, dir); len(got) != 1 {
		t.Fatalf("leaves/ holds %v after the roll back; want the first run alone", got)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	wantLeaves(t, s, batches)
	wantKeys(t, s, batches)
	wantRepeatsRefused(t, s, keyOf(batches, 150), keyOf(batches, 220))
	if end, _, ok, err := badger.RunMark(s, "leaves"); err != nil || end != 200 || !ok {
		t.Fatalf("the leaf-hash run mark after the open = %d (position recorded: %v), %v; want 200", end, ok, err)
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := leafRuns(t, dir); !slices.Equal(got, runs) {
		t.Fatalf("leaves/ holds %v after the open, want %v", got, runs)
	}
	if got := keyRuns(t, dir); !slices.Equal(got, keys) {
		t.Fatalf("keys/ holds %v after the open, want %v", got, keys)
	}
}

// A store whose window is in badger, as every store written before the
// window was held in memory, with runs before it: Open writes the window
// as runs, drops the keys, and records the runs' end with a position;
// lookups are exact before and after.
func TestBadgerMovesWindowFromBadger(t *testing.T) {
	badger.SetRunSize(t, 100)
	badger.SetMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	sevenths := func(index uint64) bool { return index%7 == 0 }
	batches := keyedStore(t, s, 0, 5, sevenths) // runs up to 200, the window [200, 250)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leaves, keys, err := badger.OldWindowLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if leaves != 50 || keys != 7 {
		t.Fatalf("the old layout holds %d leaf hashes and %d keys in badger; want those of the window, 50 and 7", leaves, keys)
	}
	// A copy, for a crash of the move after its runs were written.
	crashed := filepath.Join(t.TempDir(), "store")
	copyDir(t, dir, crashed)
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	for _, kind := range []string{"leaves", "keys"} {
		if end, _, ok, err := badger.RunMark(s, kind); err != nil || end != 250 || !ok {
			t.Fatalf("the %s run mark after the move = %d (position recorded: %v), %v; want 250 with a position", kind, end, ok, err)
		}
	}
	wantLeaves(t, s, batches)
	wantKeys(t, s, batches)
	batches = append(batches, keyedStore(t, s, 5, 1, sevenths)...)
	wantRepeatsRefused(t, s, keyOf(batches, 210), keyOf(batches, 252))
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := leafKeys(t, dir); n != 0 {
		t.Fatalf("badger holds %d leaf hashes after the move; want none", n)
	}
	if n := len(keyIndices(t, dir)); n != 0 {
		t.Fatalf("badger holds %d idempotency keys after the move; want none", n)
	}
	if got := leafRuns(t, dir); len(got) != 3 || got[2] != "00000000000000000200-00000000000000000250.leaves" {
		t.Fatalf("leaves/ holds %v; want the window moved to the run [200, 250)", got)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantLeaves(t, s, batches)
	wantKeys(t, s, batches)

	// The move's runs written, and neither the mark nor the drop: the
	// next Open finishes it.
	for _, run := range []string{"leaves/00000000000000000200-00000000000000000250.leaves", "keys/00000000000000000200-00000000000000000250.keys"} {
		b, err := os.ReadFile(filepath.Join(dir, run))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, run), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := openBadger(t, crashed, badger.Options{Logger: testLogger(t)})
	if end, _, ok, err := badger.RunMark(c, "leaves"); err != nil || end != 250 || !ok {
		t.Fatalf("the leaf-hash run mark after the move a crash cut short = %d (position recorded: %v), %v; want 250 with a position", end, ok, err)
	}
	wantLeaves(t, c, batches[:5])
	wantKeys(t, c, batches[:5])
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := leafKeys(t, crashed); n != 0 {
		t.Fatalf("badger holds %d leaf hashes after the move a crash cut short; want none", n)
	}
	if got := leafRuns(t, crashed); len(got) != 3 {
		t.Fatalf("leaves/ holds %v after the move a crash cut short; want 3 runs", got)
	}
}

// Lookups while the indexer writes runs find every entry committed
// before them: a run is added and the window drained in one step.
func TestBadgerWindowLookupsDuringRuns(t *testing.T) {
	badger.SetRunSize(t, 64)
	s := openBadger(t, t.TempDir(), badger.Options{Logger: testLogger(t)})
	defer s.Close()
	var mu sync.Mutex
	var committed []ledger.Batch
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			mu.Lock()
			batches := slices.Clone(committed)
			mu.Unlock()
			for _, b := range batches {
				for i, h := range b.LeafHashes {
					if got, err := s.IndexOf(t.Context(), h); err != nil || got != b.Start+uint64(i) {
						done <- fmt.Errorf("IndexOf(leaf of %d) = %d, %v", b.Start+uint64(i), got, err)
						return
					}
					if got, err := s.IndexOfKey(t.Context(), b.Keys[i]); err != nil || got != b.Start+uint64(i) {
						done <- fmt.Errorf("IndexOfKey(key of %d) = %d, %v", b.Start+uint64(i), got, err)
						return
					}
				}
			}
		}
	}()
	for start := uint64(0); start < 2000; start += 10 {
		b := testBatch(start, 10)
		b.Keys = make([][]byte, len(b.Entries))
		for i := range b.Keys {
			b.Keys[i] = fmt.Appendf(nil, "key-%d", start+uint64(i))
		}
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		committed = append(committed, b)
		mu.Unlock()
	}
	badger.WaitMerges(s)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// What the window costs resident, per entry, at the default run size: a
// map slot of a 32-byte hash and an index, and the map's spare slots.
func TestBadgerWindowBytes(t *testing.T) {
	const n = 1 << 14 // runSize
	per := badger.WindowBytes(n) / n
	t.Logf("a window of %d entries: %.1f bytes per entry, %.2f MiB", n, per, per*n/(1<<20))
	if per > 100 {
		t.Errorf("a window of %d entries takes %.1f bytes per entry; want at most 100", n, per)
	}
}
