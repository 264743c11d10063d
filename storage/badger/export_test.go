package badger

import (
	"encoding/binary"
	"os"
	"path/filepath"
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

// WaitLeafMerges waits until s has indexed every frame committed and its
// leaf-hash runs are merged as far as they call for; no commit may be
// under way.
func WaitLeafMerges(s *Store) {
	for {
		s.ov.mu.RLock()
		n := len(s.ov.frames)
		s.ov.mu.RUnlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.leaves.merged.Wait()
}

// SetLeafMergesOff stops leaf-hash runs from being merged for the rest
// of the test.
func SetLeafMergesOff(t testing.TB) {
	leafMergesOff = true
	t.Cleanup(func() { leafMergesOff = false })
}

// SetLeafMergesOn lets leaf-hash runs be merged again.
func SetLeafMergesOn() { leafMergesOff = false }

// SetLeafRunSize sets how many leaf hashes make a leaf-hash run for the
// rest of the test.
func SetLeafRunSize(t testing.TB, n uint64) {
	old := leafRunSize
	leafRunSize = n
	t.Cleanup(func() { leafRunSize = old })
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

// CheckpointKeys counts the keys badger holds of the layout before the
// checkpoint history: 'c' checkpoints and the 'm' "checkpoint" size.
func CheckpointKeys(s *Store) (int, error) {
	n := 0
	err := s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixCheckpoint}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		if _, ok, err := getUint64(txn, keyLatestCheckpoint); err != nil {
			return err
		} else if ok {
			n++
		}
		return nil
	})
	return n, err
}

// ToOldCheckpoints makes the store in dir one written before the
// checkpoint history: its checkpoints in badger, as 'c' keys and the 'm'
// "checkpoint" key, and no checkpoints/ unless keepHistory (as a crash
// of the migration after it renamed the history into place leaves it).
func ToOldCheckpoints(t testing.TB, dir string, opts Options, keepHistory bool) {
	t.Helper()
	s, err := Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(txn *badgerdb.Txn) error {
		var latest uint64
		for i := range s.cps.n {
			r, signed, err := s.cps.read(i)
			if err != nil {
				return err
			}
			if err := txn.Set(binary.BigEndian.AppendUint64([]byte{prefixCheckpoint}, r.size), signed); err != nil {
				return err
			}
			latest = r.size
		}
		return txn.Set(keyLatestCheckpoint, binary.BigEndian.AppendUint64(nil, latest))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if keepHistory {
		return
	}
	if err := os.RemoveAll(filepath.Join(dir, cpHistoryDir)); err != nil {
		t.Fatal(err)
	}
}

// AddCheckpointRecord appends a checkpoint to s's history as
// AddCheckpoint would, without its checks, as a history written by
// something else could hold it.
func AddCheckpointRecord(s *Store, size uint64, signed []byte) error { return s.cps.add(size, signed) }
