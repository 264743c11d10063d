package badger_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// The leaf-hash index keeps the older leaf hashes in runs in leaves/
// and only those after the runs in badger (leafindex.go). These tests use
// runs of 100 entries.

// leafStore commits n batches of 50 entries to the store in dir, keeping
// it open, and returns the batches.
func leafStore(t *testing.T, s *badger.Store, from, n int) []ledger.Batch {
	t.Helper()
	var batches []ledger.Batch
	for i := range n {
		b := testBatch(uint64((from+i)*50), 50)
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	return batches
}

// wantLeaves checks that IndexOf finds every batch's entries, and nothing
// for a hash no entry has.
func wantLeaves(t *testing.T, s *badger.Store, batches []ledger.Batch) {
	t.Helper()
	for _, b := range batches {
		for i, h := range b.LeafHashes {
			if got, err := s.IndexOf(t.Context(), h); err != nil || got != b.Start+uint64(i) {
				t.Fatalf("IndexOf(leaf of %d) = %d, %v", b.Start+uint64(i), got, err)
			}
		}
	}
	if _, err := s.IndexOf(t.Context(), [ledger.HashSize]byte{1, 2, 3}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("IndexOf(a hash of no entry) = %v, want ErrNotFound", err)
	}
}

// leafRuns returns the names of the runs in dir's leaves/, in order.
func leafRuns(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "leaves", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	slices.Sort(names)
	return names
}

// leafKeys counts the leaf-hash keys badger holds in the closed store in dir.
func leafKeys(t *testing.T, dir string) int {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{'h'}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Leaf hashes go to runs as they gather, the runs are merged, badger keeps
// only those after the runs, and IndexOf finds every entry, before and
// after a reopen.
func TestBadgerLeafRuns(t *testing.T) {
	badger.SetLeafRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := leafStore(t, s, 0, 30)
	// An entry whose leaf hash repeats one in the first run: the lower
	// index is found.
	b := testBatch(1500, 50)
	b.LeafHashes[1] = batches[0].LeafHashes[7]
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	batches = append(batches, ledger.Batch{Start: 1500, LeafHashes: b.LeafHashes[:1]}, ledger.Batch{Start: 1502, LeafHashes: b.LeafHashes[2:]})
	batches = append(batches, leafStore(t, s, 31, 10)...) // 2,050 entries
	wantLeaves(t, s, batches)
	badger.WaitLeafMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := leafRuns(t, dir)
	if len(runs) == 0 || len(runs) > 6 || !strings.HasPrefix(runs[0], "00000000000000000000-") {
		t.Fatalf("leaves/ holds %v; want at most 6 runs (log2(2050/100)+1) from entry 0", runs)
	}
	if n := leafKeys(t, dir); n >= 200 {
		t.Fatalf("badger holds %d leaf hashes; want fewer than two runs' worth", n)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantLeaves(t, s, batches)
}

// A store whose leaf hashes are all in badger, as every store written
// before the runs, has them moved to a run at Open.
func TestBadgerMovesLeafHashesToRuns(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := leafStore(t, s, 0, 20) // 1,000 entries, fewer than a run of the default size
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if runs := leafRuns(t, dir); len(runs) != 0 {
		t.Fatalf("leaves/ holds %v before any run", runs)
	}
	if n := leafKeys(t, dir); n != 1000 {
		t.Fatalf("badger holds %d leaf hashes, want 1000", n)
	}
	badger.SetLeafRunSize(t, 100)
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	wantLeaves(t, s, batches)
	batches = append(batches, leafStore(t, s, 20, 1)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if runs := leafRuns(t, dir); len(runs) != 1 || runs[0] != "00000000000000000000-00000000000000001000.leaves" {
		t.Fatalf("leaves/ holds %v; want the run of the 1,000 entries moved", runs)
	}
	if n := leafKeys(t, dir); n != 50 {
		t.Fatalf("badger holds %d leaf hashes after the move; want the 50 appended since", n)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantLeaves(t, s, batches)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// What a crash leaves in leaves/ is cleaned up at Open: an unfinished
// run, and runs a merge covered; a missing run, or a damaged block, is
// corruption.
func TestBadgerLeafRunsAfterCrash(t *testing.T) {
	badger.SetLeafRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := leafStore(t, s, 0, 12)
	badger.WaitLeafMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := leafRuns(t, dir)
	if len(runs) < 2 {
		t.Fatalf("leaves/ holds %v; the test needs two runs", runs)
	}
	leaves := filepath.Join(dir, "leaves")
	// A merge's inputs, under the first run (their bytes are not read),
	// and a run being written.
	first, _ := strconv.ParseUint(strings.Split(strings.TrimSuffix(runs[0], ".leaves"), "-")[1], 10, 64)
	for _, name := range []string{
		fmt.Sprintf("%020d-%020d.leaves", 0, first/2),
		fmt.Sprintf("%020d-%020d.leaves", first/2, first),
		"x.leaves.tmp",
	} {
		if err := os.WriteFile(filepath.Join(leaves, name), []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	wantLeaves(t, s, batches)
	badger.WaitLeafMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := leafRuns(t, dir); !slices.Equal(got, runs) {
		t.Fatalf("leaves/ holds %v after the reopen, want %v", got, runs)
	}

	// A block that fails its checksum.
	path := filepath.Join(leaves, runs[0])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good := slices.Clone(data)
	data[100] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	corrupt := 0
	for _, b := range batches {
		for i, h := range b.LeafHashes {
			switch got, err := s.IndexOf(t.Context(), h); {
			case errors.Is(err, ledger.ErrCorrupt):
				corrupt++
			case err != nil || got != b.Start+uint64(i):
				t.Fatalf("IndexOf(leaf of %d) with a damaged run = %d, %v", b.Start+uint64(i), got, err)
			}
		}
	}
	if corrupt == 0 {
		t.Fatal("IndexOf found every entry with a damaged block in the first run; want ErrCorrupt for those it reads")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}

	// A run missing, the last one, or one between others.
	for _, run := range []string{runs[len(runs)-1], runs[0]} {
		if err := os.Remove(filepath.Join(leaves, run)); err != nil {
			t.Fatal(err)
		}
		_, err := badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
		wantCorrupt(t, err, "leaf-hash runs")
	}
}

// Runs left unmerged (by a close, which stops the merger) are merged after
// the next Open.
func TestBadgerLeafRunsMergedAtOpen(t *testing.T) {
	badger.SetLeafRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	badger.SetLeafMergesOff(t)
	batches := leafStore(t, s, 0, 16)
	badger.WaitLeafMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if runs := leafRuns(t, dir); len(runs) != 8 {
		t.Fatalf("leaves/ holds %v; want the 8 runs of 100 entries unmerged", runs)
	}
	badger.SetLeafMergesOn()
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	badger.WaitLeafMerges(s)
	if runs := leafRuns(t, dir); len(runs) != 1 {
		t.Fatalf("leaves/ holds %v after the reopen; want one run of the 800 entries", runs)
	}
	wantLeaves(t, s, batches)
}

// A run missing between others is named: the entries the runs before it
// cover, and the range missing.
func TestBadgerMissingLeafRunNamed(t *testing.T) {
	badger.SetLeafRunSize(t, 100)
	badger.SetLeafMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	leafStore(t, s, 0, 8) // runs [0, 100), [100, 200), [200, 300), [300, 400)
	badger.WaitLeafMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := leafRuns(t, dir)
	if len(runs) != 4 {
		t.Fatalf("leaves/ holds %v; the test needs 4 runs", runs)
	}
	if err := os.Remove(filepath.Join(dir, "leaves", runs[1])); err != nil {
		t.Fatal(err)
	}
	_, err := badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
	wantCorrupt(t, err, "the leaf-hash runs in ")
	for _, want := range []string{"cover the entries up to 100, then ", runs[2], "the run of entries [100, 200) is missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open with the run of [100, 200) missing: %v; want it to say %q", err, want)
		}
	}
}
