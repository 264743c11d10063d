//go:build linux || darwin

package badger_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/storage/badger"
)

// allocated returns the bytes of disk that the files and directories under
// dir take (their allocated blocks, as du counts them, not their lengths).
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		n += info.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A new store with the default options takes at most 8 MiB of disk after
// Open and after its first commit, each time with its spare segment
// written whole if the file system has room for it (issue 17): the frame
// log reserves its segments' zeros as it grows.
func TestBadgerNewStoreFootprint(t *testing.T) {
	const limit = 8 << 20
	ctx := t.Context()
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	spare := filepath.Join(dir, "frames", "spare.frames.tmp")
	measure := func(when string) {
		t.Helper()
		badger.WaitForSpare(s)
		n := allocated(t, dir)
		if info, err := os.Stat(spare); err == nil {
			t.Logf("%s: %d KiB on disk, with a spare segment of %d KiB", when, n>>10, info.Size()>>10)
		} else {
			// Below ReserveBytes and a spare of free space.
			t.Logf("%s: %d KiB on disk, without a spare segment (%v)", when, n>>10, err)
		}
		if n > limit {
			t.Errorf("%s: the store takes %d KiB of disk, over %d KiB", when, n>>10, limit>>10)
		}
	}
	measure("after Open")
	if err := s.Commit(ctx, testBatch(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCheckpoint(ctx, 1, testCheckpoint(1)); err != nil {
		t.Fatal(err)
	}
	measure("after the first commit")
}

// indexBytes returns the bytes of the keys and values badger holds in
// the closed store in dir, by the first byte of the key (its kind, see
// Store).
func indexBytes(t *testing.T, dir string) map[byte]int64 {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := map[byte]int64{}
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			n[item.Key()[0]] += int64(len(item.Key())) + item.ValueSize()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Badger's index holds nothing per entry for its location (issue 29):
// what it holds but the leaf hashes after the last run ('h'), the
// idempotency keys ('k'), the partial tiles ('t') and the checkpoints
// ('c') is the same for 2,000 entries as for 4,000. The locations are in
// the locations file, 20 bytes per entry.
func TestBadgerIndexBytesPerEntry(t *testing.T) {
	dir := t.TempDir()
	commit := func(from, n int) map[byte]int64 {
		t.Helper()
		s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
		for i := range n {
			if err := s.Commit(t.Context(), testBatch(uint64((from+i)*100), 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return indexBytes(t, dir)
	}
	before := commit(0, 20)
	after := commit(20, 20)
	var grown int64
	for kind, n := range after {
		per := float64(n-before[kind]) / 2000
		t.Logf("badger keys of kind %q: %d bytes for 2,000 entries, %d for 4,000 (%+.2f bytes per entry)", kind, before[kind], n, per)
		if !strings.ContainsRune("hktc", rune(kind)) {
			grown += n - before[kind]
		}
	}
	if grown != 0 {
		t.Errorf("badger's keys other than leaf hashes, idempotency keys, tiles and checkpoints grew by %d bytes from 2,000 entries to 4,000; want 0", grown)
	}
	switch info, err := os.Stat(filepath.Join(dir, "locations")); {
	case err != nil:
		t.Error(err)
	case info.Size() != 4000*20:
		t.Errorf("the locations file holds %d bytes for 4,000 entries, want 20 per entry", info.Size())
	default:
		t.Logf("the locations file: %d bytes for 4,000 entries (20 per entry)", info.Size())
	}
}
