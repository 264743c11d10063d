package badger

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
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

// OldLocationLayout puts the closed store in dir in the layout before
// the locations file, as the store of an earlier version: each indexed
// frame's entry locations in an 'f' key of badger, and no locations mark;
// the file itself stays, for the caller to remove or keep (as a crash
// during the move leaves it).
func OldLocationLayout(dir string) (frames int, err error) {
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, indexDir)).WithLogger(nil))
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	l, err := openFrameLog(filepath.Join(dir, framesDir), minSegment, func(int64) bool { return false })
	if err != nil {
		return 0, err
	}
	defer l.close()
	var logEnd uint64
	if err := db.View(func(txn *badgerdb.Txn) error {
		logEnd, _, err = getUint64(txn, keyLogEnd)
		return err
	}); err != nil {
		return 0, err
	}
	txn := db.NewTransaction(true)
	defer txn.Discard()
	for _, seg := range l.segments {
		for pos := seg.first; pos < seg.end(); {
			payload, whole, err := readFrame(seg, pos)
			if err != nil {
				return 0, err
			}
			end := pos + frameHeaderSize + int64(len(payload))
			if !whole || uint64(end) > logEnd {
				break
			}
			b, _, locs, err := decodeFrame(payload)
			if err != nil {
				return 0, err
			}
			v := binary.BigEndian.AppendUint64(nil, uint64(pos+locs[0].pos))
			for _, loc := range locs {
				v = binary.BigEndian.AppendUint32(v, loc.length)
				v = binary.BigEndian.AppendUint32(v, loc.crc)
			}
			if err := txn.Set(binary.BigEndian.AppendUint64([]byte{prefixFrame}, b.Start), v); err != nil {
				return 0, err
			}
			frames++
			pos = end
		}
	}
	if err := txn.Delete(keyLocations); err != nil {
		return 0, err
	}
	return frames, txn.Commit()
}

// FrameKeys returns the start of every frame whose entry locations
// badger holds in an 'f' key in the closed store in dir.
func FrameKeys(dir string) ([]uint64, error) {
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, indexDir)).WithLogger(nil))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var starts []uint64
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixFrame}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			starts = append(starts, binary.BigEndian.Uint64(it.Item().Key()[1:]))
		}
		return nil
	})
	return starts, err
}

// SetMigrateChunk sets how many 'f' keys Open moves to the locations file
// at a time for the rest of the test.
func SetMigrateChunk(t testing.TB, n int) {
	old := migrateChunk
	migrateChunk = n
	t.Cleanup(func() { migrateChunk = old })
}

// LocationsMark returns the locations mark of s's index: the log
// position up to which its locations file holds every frame's records,
// and the records it held then.
func LocationsMark(s *Store) (end, records uint64, err error) {
	err = s.db.View(func(txn *badgerdb.Txn) error {
		end, records, err = readLocationsMark(txn)
		return err
	})
	return end, records, err
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

// SetSortChunk sets how many entries' idempotency keys are sorted at once
// into a run, for the rest of the test.
func SetSortChunk(t testing.TB, n uint64) {
	old := sortChunk
	sortChunk = n
	t.Cleanup(func() { sortChunk = old })
}

// RememberMissedKey records, as a lookup that found key in no run does,
// that no run holds it while the runs end at end.
func RememberMissedKey(s *Store, key []byte, end uint64) { s.keys.rememberMissed(keyHash(key), end) }

// KeyRunsEnd is the entry after the idempotency-key runs.
func KeyRunsEnd(s *Store) uint64 { return s.keys.runsEnd() }

// MissedKeys is how many lookups' misses the key runs remember.
func MissedKeys(s *Store) int {
	s.keys.missedMu.Lock()
	defer s.keys.missedMu.Unlock()
	return len(s.keys.missed)
}

// SetOldFrames has Commit write frames in the format before the delta
// format, as the store of an earlier version, for the rest of the test.
func SetOldFrames(t testing.TB) {
	frameEncoder = encodeOldFrame
	t.Cleanup(func() { frameEncoder = encodeFrame })
}

// SetNewFrames has Commit write the delta format again.
func SetNewFrames() { frameEncoder = encodeFrame }

// SetTileFlushOff stops the indexer from writing the partial tiles (and
// the tiles mark) but when it stops, for the rest of the test.
func SetTileFlushOff(t testing.TB) {
	old := tileFlushInterval
	tileFlushInterval = math.MaxInt64
	t.Cleanup(func() { tileFlushInterval = old })
}

// FrameLogEnd returns the log position where s's frames end.
func FrameLogEnd(s *Store) int64 {
	s.log.mu.RLock()
	defer s.log.mu.RUnlock()
	if n := len(s.log.segments); n > 0 {
		return s.log.segments[n-1].end()
	}
	return 0
}

// encodeOldFrame is encodeFrame as it was before the delta format: every
// tile of the batch whole, its hash count in a u16.
func encodeOldFrame(buf []byte, b ledger.Batch, locs []entryLocation) ([]byte, []entryLocation, error) {
	buf = append(buf, make([]byte, frameHeaderSize)...)
	frame := len(buf) - frameHeaderSize
	buf = binary.BigEndian.AppendUint64(buf, b.Start)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b.Entries)))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b.Tiles)))
	locs = locs[:0]
	for i, e := range b.Entries {
		var key []byte
		if len(b.Keys) != 0 {
			key = b.Keys[i]
		}
		if len(key) > 0xFFFF {
			return nil, nil, fmt.Errorf("ledger: batch at %d: an idempotency key of %d bytes: %w", b.Start, len(key), ledger.ErrConflict)
		}
		sum := crc32.Checksum(e, castagnoli)
		locs = append(locs, entryLocation{length: uint32(len(e)), crc: sum})
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(e)))
		buf = binary.BigEndian.AppendUint32(buf, sum)
		buf = append(buf, b.LeafHashes[i][:]...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(key)))
		buf = append(buf, key...)
	}
	for _, t := range b.Tiles {
		buf = append(buf, t.Level)
		buf = binary.BigEndian.AppendUint64(buf, t.Index)
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(t.Hashes)/ledger.HashSize))
		buf = append(buf, t.Hashes...)
	}
	for i, e := range b.Entries {
		locs[i].pos = int64(len(buf) - frame)
		buf = append(buf, e...)
	}
	payload := buf[frame+frameHeaderSize:]
	binary.BigEndian.PutUint32(buf[frame:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[frame+4:], crc32.Checksum(payload, castagnoli))
	return buf, locs, nil
}

func leafHashKey(h [ledger.HashSize]byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{prefixLeafHash}, h[:]...), index)
}

func idempotencyKey(key []byte) []byte {
	return append([]byte{prefixKey}, key...)
}

// OldWindowLayout puts the closed store in dir in the layout before the
// window held in memory (window.go), as the store of an earlier version:
// the leaf hash of each indexed entry after the leaf-hash runs in an 'h'
// key of badger, the key of each after the key runs in a 'k' key, and
// each run mark, if there is one, of 8 bytes, the entry alone. It
// returns how many keys of each it wrote.
func OldWindowLayout(dir string) (leaves, keys int, err error) {
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, indexDir)).WithLogger(nil))
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	l, err := openFrameLog(filepath.Join(dir, framesDir), minSegment, func(int64) bool { return false })
	if err != nil {
		return 0, 0, err
	}
	defer l.close()
	ends := map[byte]uint64{}
	for _, kind := range []*runKind{&leafRunKind, &keyRunKind} {
		names, err := os.ReadDir(filepath.Join(dir, kind.dir))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, 0, err
		}
		for _, d := range names {
			if _, end, ok := parseRunName(kind, d.Name()); ok {
				ends[kind.prefix] = max(ends[kind.prefix], end)
			}
		}
	}
	var logEnd uint64
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	if logEnd, _, err = getUint64(txn, keyLogEnd); err != nil {
		return 0, 0, err
	}
	for _, kind := range []*runKind{&leafRunKind, &keyRunKind} {
		end, _, _, ok, err := readRunMark(txn, kind.mark)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			if err := txn.Set(kind.mark, binary.BigEndian.AppendUint64(nil, end)); err != nil {
				return 0, 0, err
			}
		}
	}
	for _, seg := range l.segments {
		for pos := seg.first; pos < seg.end(); {
			payload, whole, err := readFrame(seg, pos)
			if err != nil {
				return 0, 0, err
			}
			end := pos + frameHeaderSize + int64(len(payload))
			if !whole || uint64(end) > logEnd {
				break
			}
			b, _, _, err := decodeFrame(payload)
			if err != nil {
				return 0, 0, err
			}
			for i, h := range b.LeafHashes {
				index := b.Start + uint64(i)
				if index >= ends[prefixLeafHash] {
					if err := txn.Set(leafHashKey(h, index), nil); err != nil {
						return 0, 0, err
					}
					leaves++
				}
				if len(b.Keys) > 0 && len(b.Keys[i]) > 0 && index >= ends[prefixKey] {
					if err := txn.Set(idempotencyKey(b.Keys[i]), binary.BigEndian.AppendUint64(nil, index)); err != nil {
						return 0, 0, err
					}
					keys++
				}
			}
			pos = end
		}
	}
	return leaves, keys, txn.Commit()
}

// RollBackRuns leaves the closed store in dir as a crash after the index
// of the frame that brought its runs to end, but before their next runs
// were written, leaves it: the runs from end on removed (the runs not
// merged across end), and each run mark at end, with the position of the
// frame that starts there.
func RollBackRuns(dir string, end uint64) (err error) {
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, indexDir)).WithLogger(nil))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	l, err := openFrameLog(filepath.Join(dir, framesDir), minSegment, func(int64) bool { return false })
	if err != nil {
		return err
	}
	defer l.close()
	pos := int64(-1)
	for _, seg := range l.segments {
		for at := seg.first; at < seg.end() && pos < 0; {
			payload, whole, err := readFrame(seg, at)
			if err != nil || !whole {
				return errors.Join(err, errors.New("no frame starts at the entry"))
			}
			b, _, _, err := decodeFrame(payload)
			if err != nil {
				return err
			}
			if b.Start == end {
				pos = at
			}
			at += frameHeaderSize + int64(len(payload))
		}
	}
	if pos < 0 {
		return errors.New("no frame starts at the entry")
	}
	for _, kind := range []*runKind{&leafRunKind, &keyRunKind} {
		names, err := os.ReadDir(filepath.Join(dir, kind.dir))
		if err != nil {
			return err
		}
		for _, d := range names {
			if first, _, ok := parseRunName(kind, d.Name()); ok && first >= end {
				if err := os.Remove(filepath.Join(dir, kind.dir, d.Name())); err != nil {
					return err
				}
			}
		}
		v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, end), uint64(pos))
		if err := db.Update(func(txn *badgerdb.Txn) error { return txn.Set(kind.mark, v) }); err != nil {
			return err
		}
	}
	return nil
}

// RunMark returns the run mark of kind "leaves" or "keys" in s's index:
// the entry the runs reach, the position of the frame that holds it, and
// whether the mark has one.
func RunMark(s *Store, kind string) (end uint64, pos int64, posKnown bool, err error) {
	key := keyLeavesEnd
	if kind == "keys" {
		key = keyKeysEnd
	}
	err = s.db.View(func(txn *badgerdb.Txn) error {
		end, pos, posKnown, _, err = readRunMark(txn, key)
		return err
	})
	return end, pos, posKnown, err
}

// WindowBytes returns the heap bytes a leaf-hash window of n entries
// takes, measured as the heap grows while one is filled: the least of
// three tries, as other goroutines may free memory meanwhile.
func WindowBytes(n int) float64 {
	least := int64(-1)
	for range 3 {
		ri := &runIndex{kind: &leafRunKind, window: map[[ledger.HashSize]byte]uint64{}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		ri.addToWindow(0, n, func(i int) ([ledger.HashSize]byte, bool) {
			return sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))), true
		})
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(ri)
		if d := int64(after.HeapAlloc) - int64(before.HeapAlloc); d > 0 && (least < 0 || d < least) {
			least = d
		}
	}
	return float64(least)
}
