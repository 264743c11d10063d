package badger_test

import (
	"encoding/binary"
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
// and those after the runs in memory, in its window (runindex.go,
// window.go). These tests use runs of 100 entries.

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
	n := 0
	badgerKeys(t, dir, 'h', func(_, _ []byte) { n++ })
	return n
}

// badgerKeys calls fn with each key of the prefix that badger holds in
// the closed store in dir, and its value.
func badgerKeys(t *testing.T, dir string, prefix byte, fn func(key, value []byte)) {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefix}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			fn(it.Item().KeyCopy(nil), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Leaf hashes go to runs as they gather, the runs are merged, badger keeps
// none, and IndexOf finds every entry, before and after a reopen.
func TestBadgerLeafRuns(t *testing.T) {
	badger.SetRunSize(t, 100)
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
	badger.WaitMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := leafRuns(t, dir)
	if len(runs) == 0 || len(runs) > 6 || !strings.HasPrefix(runs[0], "00000000000000000000-") {
		t.Fatalf("leaves/ holds %v; want at most 6 runs (log2(2050/100)+1) from entry 0", runs)
	}
	if n := leafKeys(t, dir); n != 0 {
		t.Fatalf("badger holds %d leaf hashes; want none (the window is in memory)", n)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantLeaves(t, s, batches)
}

// A store whose leaf hashes are all in badger, as every store written
// before the runs, has them moved to a run at Open, and keeps none in
// badger after.
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
	if _, _, err := badger.OldWindowLayout(dir); err != nil {
		t.Fatal(err)
	}
	if n := leafKeys(t, dir); n != 1000 {
		t.Fatalf("badger holds %d leaf hashes, want 1000", n)
	}
	badger.SetRunSize(t, 100)
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	wantLeaves(t, s, batches)
	batches = append(batches, leafStore(t, s, 20, 1)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if runs := leafRuns(t, dir); len(runs) != 1 || runs[0] != "00000000000000000000-00000000000000001000.leaves" {
		t.Fatalf("leaves/ holds %v; want the run of the 1,000 entries moved", runs)
	}
	if n := leafKeys(t, dir); n != 0 {
		t.Fatalf("badger holds %d leaf hashes after the move; want none", n)
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
	badger.SetRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := leafStore(t, s, 0, 12)
	badger.WaitMerges(s)
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
	badger.WaitMerges(s)
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
	badger.SetRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	badger.SetMergesOff(t)
	batches := leafStore(t, s, 0, 16)
	badger.WaitMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if runs := leafRuns(t, dir); len(runs) != 8 {
		t.Fatalf("leaves/ holds %v; want the 8 runs of 100 entries unmerged", runs)
	}
	badger.SetMergesOn()
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	badger.WaitMerges(s)
	if runs := leafRuns(t, dir); len(runs) != 1 {
		t.Fatalf("leaves/ holds %v after the reopen; want one run of the 800 entries", runs)
	}
	wantLeaves(t, s, batches)
}

// A run missing between others is named: the entries the runs before it
// cover, and the range missing.
func TestBadgerMissingLeafRunNamed(t *testing.T) {
	badger.SetRunSize(t, 100)
	badger.SetMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	leafStore(t, s, 0, 8) // runs [0, 100), [100, 200), [200, 300), [300, 400)
	badger.WaitMerges(s)
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

// The idempotency-key index keeps the keys of the older entries in runs
// in keys/, under their SHA-256, and only those after the runs in badger,
// with the same machinery as the leaf hashes. Not every entry has a key:
// a run may hold fewer records than entries, or none.

// keyedStore commits n batches of 50 entries from batch from on, keying
// an entry if keyed says so, and returns the batches.
func keyedStore(t *testing.T, s *badger.Store, from, n int, keyed func(index uint64) bool) []ledger.Batch {
	t.Helper()
	var batches []ledger.Batch
	for i := range n {
		b := testBatch(uint64((from+i)*50), 50)
		b.Keys = make([][]byte, len(b.Entries))
		for j := range b.Keys {
			if index := b.Start + uint64(j); keyed(index) {
				b.Keys[j] = fmt.Appendf(nil, "mediator-1\x00key-%d", index)
			}
		}
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	return batches
}

// sparse keys every seventh entry, none of the entries [300, 500).
func sparse(index uint64) bool { return index%7 == 0 && (index < 300 || index >= 500) }

// wantKeys checks that IndexOfKey finds every batch's keys, and nothing
// for a key no entry has.
func wantKeys(t *testing.T, s *badger.Store, batches []ledger.Batch) {
	t.Helper()
	for _, b := range batches {
		for i, k := range b.Keys {
			if len(k) == 0 {
				continue
			}
			if got, err := s.IndexOfKey(t.Context(), k); err != nil || got != b.Start+uint64(i) {
				t.Fatalf("IndexOfKey(key of %d) = %d, %v", b.Start+uint64(i), got, err)
			}
		}
	}
	for _, k := range []string{"mediator-1\x00key-999999", "mediator-2\x00key-0", "x"} {
		if _, err := s.IndexOfKey(t.Context(), []byte(k)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("IndexOfKey(%q, the key of no entry) = %v, want ErrNotFound", k, err)
		}
	}
}

// keyRuns returns the names of the runs in dir's keys/, in order.
func keyRuns(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "keys", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	slices.Sort(names)
	return names
}

// keyIndices returns the entries whose idempotency keys badger holds in
// the closed store in dir.
func keyIndices(t *testing.T, dir string) []uint64 {
	t.Helper()
	var indices []uint64
	badgerKeys(t, dir, 'k', func(_, v []byte) {
		if len(v) != 8 {
			t.Fatalf("an idempotency key's value of %d bytes", len(v))
		}
		indices = append(indices, binary.BigEndian.Uint64(v))
	})
	slices.Sort(indices)
	return indices
}

// keyOf returns the idempotency key of entry index, which has one.
func keyOf(batches []ledger.Batch, index uint64) []byte {
	for _, b := range batches {
		if index >= b.Start && index < b.Start+uint64(len(b.Keys)) && len(b.Keys[index-b.Start]) > 0 {
			return b.Keys[index-b.Start]
		}
	}
	panic(fmt.Sprintf("entry %d has no key", index))
}

// wantRepeatsRefused checks that Commit refuses a batch that repeats a
// stored key, whichever part of the index holds it, and writes nothing.
func wantRepeatsRefused(t *testing.T, s *badger.Store, keys ...[]byte) {
	t.Helper()
	st, err := s.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		b := testBatch(st.Size, 2)
		b.Keys = [][]byte{[]byte("a key of no entry"), k}
		if err := s.Commit(t.Context(), b); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("Commit of a batch repeating the key %q = %v, want ErrConflict", k, err)
		}
	}
	if after, err := s.State(t.Context()); err != nil || after.Size != st.Size {
		t.Fatalf("a refused batch changed the size from %d to %d (%v)", st.Size, after.Size, err)
	}
}

// Idempotency keys go to runs as they gather, runs with few keys or none
// among them, the runs are merged, badger keeps only those after the
// runs, IndexOfKey finds every key before and after a reopen, Commit
// refuses a key repeated from a run, and Check holds the runs to the
// frames.
func TestBadgerKeyRuns(t *testing.T) {
	badger.SetRunSize(t, 100)
	badger.SetMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := keyedStore(t, s, 0, 12, sparse) // runs [0, 100) to [500, 600)
	badger.WaitMerges(s)
	wantKeys(t, s, batches)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := keyRuns(t, dir)
	if len(runs) != 6 || runs[3] != "00000000000000000300-00000000000000000400.keys" {
		t.Fatalf("keys/ holds %v; want the 6 runs of 100 entries unmerged", runs)
	}
	// The runs of entries without a key hold no record: a footer alone.
	for _, run := range runs[3:5] {
		if info, err := os.Stat(filepath.Join(dir, "keys", run)); err != nil || info.Size() != 24 {
			t.Fatalf("the run %s of entries without a key: %v, %v; want 24 bytes", run, info, err)
		}
	}
	badger.SetMergesOn()
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches = append(batches, keyedStore(t, s, 12, 29, sparse)...) // 2,050 entries, runs up to 2,000
	wantKeys(t, s, batches)
	// Keys in a run, in a run after the entries without one, and among
	// the latest (in badger or the overlay).
	wantRepeatsRefused(t, s, keyOf(batches, 0), keyOf(batches, 504), keyOf(batches, 2044))
	badger.WaitMerges(s)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs = keyRuns(t, dir)
	if len(runs) == 0 || len(runs) > 6 || !strings.HasPrefix(runs[0], "00000000000000000000-") {
		t.Fatalf("keys/ holds %v; want at most 6 runs (log4(2000/100)+1 for keys) from entry 0", runs)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantKeys(t, s, batches)
	// In a run, and in badger.
	wantRepeatsRefused(t, s, keyOf(batches, 0), keyOf(batches, 2044))
}

// Badger holds no idempotency key: the runs hold those of the older
// entries, the window in memory those after.
func TestBadgerKeyRunsLeaveNoKeysInBadger(t *testing.T) {
	badger.SetRunSize(t, 100)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	every := func(uint64) bool { return true }
	batches := keyedStore(t, s, 0, 9, every) // 450 entries, runs up to 400
	badger.WaitMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if indices := keyIndices(t, dir); len(indices) != 0 {
		t.Fatalf("badger holds the idempotency keys of %d entries; want none", len(indices))
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantKeys(t, s, batches)
}

// A store whose idempotency keys are all in badger, as every store
// written before the key runs, has them moved to runs at Open, sorted in
// chunks, and the runs merged.
func TestBadgerMovesKeysToRuns(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	batches := keyedStore(t, s, 0, 20, sparse) // 1,000 entries, fewer than a run of the default size
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	keys := 0
	for _, b := range batches {
		for _, k := range b.Keys {
			if len(k) > 0 {
				keys++
			}
		}
	}
	if _, _, err := badger.OldWindowLayout(dir); err != nil {
		t.Fatal(err)
	}
	if n := len(keyIndices(t, dir)); n != keys {
		t.Fatalf("badger holds %d idempotency keys, want %d", n, keys)
	}
	// As a store from before keys/ (no directory, no mark).
	if err := os.RemoveAll(filepath.Join(dir, "keys")); err != nil {
		t.Fatal(err)
	}
	badger.SetRunSize(t, 100)
	badger.SetSortChunk(t, 300)
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	wantKeys(t, s, batches)
	batches = append(batches, keyedStore(t, s, 20, 1, sparse)...)
	badger.WaitMerges(s)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Chunks of 300 entries, merged while a run is more than a quarter
	// of the one before it (a key run's ratio; leaf-hash runs, of ratio
	// 2, would leave [0, 600) and [600, 900) unmerged).
	want := []string{"00000000000000000000-00000000000000000900.keys", "00000000000000000900-00000000000000001000.keys"}
	if runs := keyRuns(t, dir); !slices.Equal(runs, want) {
		t.Fatalf("keys/ holds %v; want the runs of the 1,000 entries moved, %v", runs, want)
	}
	if indices := keyIndices(t, dir); len(indices) != 0 {
		t.Fatalf("badger holds the keys of the entries %v after the move; want none", indices)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantKeys(t, s, batches)
	wantRepeatsRefused(t, s, keyOf(batches, 0), keyOf(batches, 1001))
}

// A key-run block that fails its checksum is corruption, to IndexOfKey,
// to Commit (which cannot tell a key unused) and to Check; a run missing
// is refused at Open; a run that holds records of no key is found by
// Check.
func TestBadgerKeyRunsDamaged(t *testing.T) {
	badger.SetRunSize(t, 100)
	badger.SetMergesOff(t)
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	every := func(uint64) bool { return true }
	batches := keyedStore(t, s, 0, 5, every)
	badger.WaitMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := keyRuns(t, dir)
	if len(runs) != 2 {
		t.Fatalf("keys/ holds %v; the test needs two runs", runs)
	}
	path := filepath.Join(dir, "keys", runs[0])
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := slices.Clone(good)
	data[100] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	corrupt := 0
	for _, b := range batches {
		for i, k := range b.Keys {
			switch got, err := s.IndexOfKey(t.Context(), k); {
			case errors.Is(err, ledger.ErrCorrupt):
				corrupt++
			case err != nil || got != b.Start+uint64(i):
				t.Fatalf("IndexOfKey(key of %d) with a damaged run = %d, %v", b.Start+uint64(i), got, err)
			}
		}
	}
	if corrupt == 0 {
		t.Fatal("IndexOfKey found every key with a damaged block in the first run; want ErrCorrupt for those it reads")
	}
	b := testBatch(250, 1)
	b.Keys = batches[0].Keys[:1]
	if err := s.Commit(t.Context(), b); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Commit of a key in a damaged block = %v; want ErrCorrupt", err)
	}
	wantCorrupt(t, s.Check(t.Context()), "idempotency-key run")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}

	// The first run of this store, which keys every entry, put in the
	// place of that of a store which keys every seventh: its lookups are
	// right, but it holds records of keys no frame has (100 and the 14 of
	// the second run, for 15 and 14 keys).
	other := t.TempDir()
	s = openBadger(t, other, badger.Options{Logger: testLogger(t)})
	keyedStore(t, s, 0, 5, func(index uint64) bool { return index%7 == 0 })
	badger.WaitMerges(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "keys", runs[0]), good, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, other, badger.Options{Logger: testLogger(t)})
	wantCorrupt(t, s.Check(t.Context()), "the idempotency-key runs in keys hold 114 records, the frames of their 200 entries 29 keys")
	// A run cut short under the open store: its block is not read from
	// the buffer of another's.
	if err := os.Truncate(filepath.Join(other, "keys", runs[1]), 100); err != nil {
		t.Fatal(err)
	}
	_, err = s.IndexOfKey(t.Context(), []byte("mediator-1\x00key-105"))
	wantCorrupt(t, err, "is cut short")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A run missing.
	if err := os.Remove(filepath.Join(dir, "keys", runs[1])); err != nil {
		t.Fatal(err)
	}
	_, err = badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
	wantCorrupt(t, err, "the idempotency-key runs in keys reach entry 100, but runs up to 200 were written")
}

// BenchmarkIndexOfKey looks up idempotency keys in a store of 100,000
// keyed entries in runs of 1,024 (it logs how many runs are left: 3;
// ten million entries in runs of the default size would leave up to 5):
// keys no entry has, as every commit's check of its keys does, a
// commit's check of 256 keys, and keys of old entries.
func BenchmarkIndexOfKey(b *testing.B) {
	badger.SetRunSize(b, 1024)
	dir := b.TempDir()
	s, err := badger.Open(b.Context(), dir, badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	for start := uint64(0); start < n; start += 500 {
		batch := testBatch(start, 500)
		batch.Keys = make([][]byte, len(batch.Entries))
		for j := range batch.Keys {
			batch.Keys[j] = fmt.Appendf(nil, "mediator-1\x00key-%d", start+uint64(j))
		}
		if err := s.Commit(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	badger.WaitMerges(s)
	runs, err := filepath.Glob(filepath.Join(dir, "keys", "*.keys"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d key runs", len(runs))
	b.Run("absent", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := s.IndexOfKey(b.Context(), fmt.Appendf(nil, "mediator-1\x00other-%d", i)); !errors.Is(err, ledger.ErrNotFound) {
				b.Fatal(err)
			}
		}
	})
	// A batch of 256 keys of which only the last is stored: Commit looks
	// every one up and refuses the batch, writing nothing.
	b.Run("commit-check-256", func(b *testing.B) {
		st, err := s.State(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		batch := testBatch(st.Size, 256)
		batch.Keys = make([][]byte, len(batch.Entries))
		i := 0
		for b.Loop() {
			for j := range batch.Keys {
				i++
				batch.Keys[j] = fmt.Appendf(batch.Keys[j][:0], "mediator-1\x00other-%d", i)
			}
			batch.Keys[255] = fmt.Appendf(nil, "mediator-1\x00key-%d", i%n)
			if err := s.Commit(b.Context(), batch); !errors.Is(err, ledger.ErrConflict) {
				b.Fatal(err)
			}
		}
	})
	b.Run("present", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i = (i + 7919) % n
			if got, err := s.IndexOfKey(b.Context(), fmt.Appendf(nil, "mediator-1\x00key-%d", i)); err != nil || got != uint64(i) {
				b.Fatal(got, err)
			}
		}
	})
}

// A lookup that finds a key in no run spares the commit that follows it
// the runs' reads, and only while the runs end where they did: a miss
// remembered before the runs moved on, or a key the runs hold, is
// searched again, and Commit refuses a key a run holds whatever was
// remembered of it.
func TestBadgerKeyLookupMissSparesCommit(t *testing.T) {
	badger.SetRunSize(t, 100)
	every := func(uint64) bool { return true }
	s := openBadger(t, t.TempDir(), badger.Options{Logger: testLogger(t)})
	defer s.Close()
	batches := keyedStore(t, s, 0, 5, every) // 250 entries, runs up to 200
	badger.WaitMerges(s)
	end := badger.KeyRunsEnd(s)
	if end == 0 {
		t.Fatal("no key run written")
	}
	fresh := []byte("mediator-1\x00a key of no entry yet")
	if _, err := s.IndexOfKey(t.Context(), fresh); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("IndexOfKey(a new key) = %v, want ErrNotFound", err)
	}
	if n := badger.MissedKeys(s); n != 1 {
		t.Fatalf("the key runs remember %d misses after one, want 1", n)
	}
	b := testBatch(250, 1)
	b.Keys = [][]byte{fresh}
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if n := badger.MissedKeys(s); n != 0 {
		t.Fatalf("the key runs remember %d misses after the commit used it, want 0", n)
	}
	// A key a run holds, remembered as missed by runs that ended earlier
	// or, wrongly, where they end now: refused either way but the second,
	// which shows that the remembered miss is what spares the runs' read.
	inRun := keyOf(batches, 10)
	badger.RememberMissedKey(s, inRun, end-1)
	wantRepeatsRefused(t, s, inRun)
	badger.RememberMissedKey(s, inRun, end)
	c := testBatch(251, 1)
	c.Keys = [][]byte{inRun}
	if err := s.Commit(t.Context(), c); err != nil {
		t.Fatalf("a commit trusting a remembered miss searched the runs anyway: %v", err)
	}
}
