package badger

import (
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// WriteCheckpointFile lends the external tests the checkpoint file's
// writer, so that they can leave the store as a crash between the file and
// the index would (cpfile.go).
var WriteCheckpointFile = writeCheckpointFile

// WaitForSpare waits until the spare segment s's frame log is writing, if
// any, is written or given up.
func WaitForSpare(s *Store) { s.log.prepared.Wait() }

// WaitMerges waits until s has indexed every frame committed, or its
// indexer failed, and its leaf-hash and idempotency-key runs are merged
// as far as they call for; no commit may be under way.
func WaitMerges(s *Store) {
	for {
		s.ov.mu.RLock()
		n, failed := len(s.ov.frames), s.ov.failed
		s.ov.mu.RUnlock()
		if n == 0 || failed != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.leaves.merged.Wait()
	s.keys.merged.Wait()
}

// SetMergesOff stops leaf-hash and idempotency-key runs from being merged
// for the rest of the test.
func SetMergesOff(t testing.TB) {
	mergesOff = true
	t.Cleanup(func() { mergesOff = false })
}

// SetMergesOn lets runs be merged again.
func SetMergesOn() { mergesOff = false }

// SetRunSize sets after how many entries their leaf hashes and
// idempotency keys are written as runs, for the rest of the test.
func SetRunSize(t testing.TB, n uint64) {
	old := runSize
	runSize = n
	t.Cleanup(func() { runSize = old })
}

// DamageFrameIndex changes the checksum the index records for the first
// entry of the frame that starts at entry start, as a damaged index would,
// for the tests of Check.
func DamageFrameIndex(s *Store, start uint64) error {
	return s.db.Update(func(txn *badgerdb.Txn) error {
		first, locs, err := frameOf(txn, start)
		if err != nil {
			return err
		}
		locs[0].crc ^= 1
		return txn.Set(frameKey(first), appendFrameIndex(nil, locs))
	})
}

// SetFreeSpace makes the stores opened from now on, until the test ends,
// see free as the free space of their file system.
func SetFreeSpace(t testing.TB, free func() uint64) {
	freeSpace = func(string) (uint64, error) { return free(), nil }
	t.Cleanup(func() { freeSpace = freeBytes })
}

// CloseIndex closes the badger index that s.Close left open on a full
// disk, as the end of the process would release it.
func CloseIndex(s *Store) error { return s.db.Close() }

// SetSortChunk sets how many entries' idempotency keys are sorted at once
// into a run, for the rest of the test.
func SetSortChunk(t testing.TB, n uint64) {
	old := sortChunk
	sortChunk = n
	t.Cleanup(func() { sortChunk = old })
}
