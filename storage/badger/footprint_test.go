//go:build linux || darwin

package badger_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

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
