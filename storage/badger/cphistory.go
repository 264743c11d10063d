package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
)

// The checkpoint history keeps every signed checkpoint of a Store, for
// Checkpoint(size) and the consistency proofs between checkpoints, in two
// files of the directory "checkpoints", read with pread: badger maps its
// tables into the process, and a history in badger was resident memory
// that grew by a few hundred bytes per checkpoint, up to ten a second.
//
// "notes" holds the checkpoints, appended one record each, integers
// big-endian:
//
//	u64 tree size
//	u32 length of the note
//	u32 CRC-32C (Castagnoli) of the tree size, the length and the note
//	the signed checkpoint note
//
// "index" holds one fixed record of 24 bytes per record of notes, in the
// same order:
//
//	u64 tree size
//	u64 offset of the record in notes
//	u32 length of the note
//	u32 CRC-32C of the 20 bytes before it
//
// Sizes increase from record to record, but for a key rotation's second
// signature (Store.AddCheckpoint), which repeats the latest size with
// signature lines added: the later record of a size is the checkpoint for
// it. Checkpoint(size) searches the index with pread, probing where the
// sizes' spread puts size (cpHistory.search) until the range left fits in
// one read of 4 KiB, then reads the note with one pread.
//
// An append writes the note's record and fdatasyncs notes, then writes
// the index record, and fdatasyncs index every cpIndexSync records (and
// at Close): the notes are the durable copy. An index record is written
// only once its note is durable, so a crash can lose at most the last
// record of notes, never acknowledged, and the index records written
// since its last sync, which open writes again from the notes after the
// last index record that holds. The checkpoint file (cpfile.go) is written
// before either, so the latest checkpoint survives the loss of both
// records; open puts it back (Store.recover).
//
// A store written before the history kept the checkpoints in badger ('c'
// keys); open writes them into "checkpoints.tmp", syncs it, renames it
// "checkpoints", syncs the store directory, and only then deletes the
// keys, so a crash before the rename migrates again, and one after it
// leaves keys that the next open deletes.
const (
	cpHistoryDir    = "checkpoints"
	cpHistoryTmpDir = "checkpoints.tmp"
	cpNotesFile     = "notes"
	cpIndexFile     = "index"
	cpNoteHeader    = 16
	cpIndexRecord   = 24
	// cpSearchSpan is how many index records a search reads at once when
	// few are left: 4 KiB.
	cpSearchSpan = 4096 / cpIndexRecord
	// cpIndexSync is how many index records are written between two
	// syncs of the index (and Close syncs it): the notes are the durable
	// copy, and at most this many index records are made again from them
	// after a power loss.
	cpIndexSync = 64
)

// cpHistory is a Store's checkpoint history in its directory. Appends come
// one at a time (AddCheckpoint's contract); reads may come at once with
// them, and read only the records published in n.
type cpHistory struct {
	dir          string
	notes, index *os.File

	mu         sync.RWMutex
	n          int64  // index records
	end        int64  // bytes of notes the records cover
	firstSize  uint64 // tree size of the first record, if n > 0
	latestSize uint64 // tree size of the last record, if n > 0
	latest     []byte // the last record's note, never changed in place
}

// cpRecord is one checkpoint of the history as its index records it.
type cpRecord struct {
	size   uint64
	offset int64
	length uint32
}

func appendCPIndexRecord(b []byte, r cpRecord) []byte {
	b = binary.BigEndian.AppendUint64(b, r.size)
	b = binary.BigEndian.AppendUint64(b, uint64(r.offset))
	b = binary.BigEndian.AppendUint32(b, r.length)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[len(b)-20:], castagnoli))
}

// parseCPIndexRecord decodes the index record b, reporting whether its
// checksum holds.
func parseCPIndexRecord(b []byte) (cpRecord, bool) {
	r := cpRecord{size: binary.BigEndian.Uint64(b), offset: int64(binary.BigEndian.Uint64(b[8:])), length: binary.BigEndian.Uint32(b[16:])}
	return r, crc32.Checksum(b[:20], castagnoli) == binary.BigEndian.Uint32(b[20:]) && r.offset >= 0
}

func appendCPNote(b []byte, size uint64, signed []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint32(b, uint32(len(signed)))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, signed...)
	binary.BigEndian.PutUint32(b[start+12:], cpNoteCRC(b[start:]))
	return b
}

// cpNoteCRC is the checksum of the note record b, its checksum field
// skipped.
func cpNoteCRC(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:12], castagnoli), castagnoli, b[cpNoteHeader:])
}

// parseCPNote decodes the whole note record b, reporting whether it is
// one: its length is b's and its checksum holds.
func parseCPNote(b []byte) (size uint64, signed []byte, ok bool) {
	if len(b) < cpNoteHeader || int64(binary.BigEndian.Uint32(b[8:])) != int64(len(b)-cpNoteHeader) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(b), b[cpNoteHeader:], cpNoteCRC(b) == binary.BigEndian.Uint32(b[12:])
}

// openCPHistory opens the history in dir, creating it if absent. It makes
// the index whole from the notes after its last record, and cuts a record
// that a crash left unfinished at the end of either file (never
// acknowledged: an append returns once both are synced); it says what it
// did in repairs. Anything else that does not hold is ErrCorrupt.
func openCPHistory(dir string) (_ *cpHistory, repairs []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("ledger: creating the checkpoint history %s: %w", dir, err)
	}
	h := &cpHistory{dir: dir}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	_, statErr := os.Stat(filepath.Join(dir, cpIndexFile))
	if _, err := os.Stat(filepath.Join(dir, cpNotesFile)); err != nil {
		statErr = err
	}
	if h.notes, err = os.OpenFile(filepath.Join(dir, cpNotesFile), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, nil, fmt.Errorf("ledger: opening the checkpoint history: %w", err)
	}
	if h.index, err = os.OpenFile(filepath.Join(dir, cpIndexFile), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, nil, fmt.Errorf("ledger: opening the checkpoint history: %w", err)
	}
	if statErr != nil {
		// New files, or the index made again: their names must outlive a
		// power loss as their records do.
		if err := errors.Join(syncDir(dir), syncDir(filepath.Dir(dir))); err != nil {
			return nil, nil, fmt.Errorf("ledger: creating the checkpoint history %s: %w", dir, err)
		}
	}
	indexLen, err := fileSize(h.index)
	if err != nil {
		return nil, nil, err
	}
	notesLen, err := fileSize(h.notes)
	if err != nil {
		return nil, nil, err
	}
	h.n = indexLen / cpIndexRecord
	if indexLen%cpIndexRecord != 0 {
		repairs = append(repairs, fmt.Sprintf("cut %d bytes of an index record a crash left unfinished at the end of the checkpoint history's index",
			indexLen%cpIndexRecord))
	}
	// The index records after its last sync, at most cpIndexSync, may
	// be lost or unfinished after a power loss: from the first that does
	// not hold, they are cut and written again from the notes. The ones
	// before must hold.
	for i := max(0, h.n-cpIndexSync); i < h.n; i++ {
		if _, ok, err := h.record(i); err != nil {
			return nil, nil, err
		} else if !ok {
			repairs = append(repairs, fmt.Sprintf("cut the checkpoint history's index at record %d of %d, a record a crash left unfinished after the index's last sync", i, h.n))
			h.n = i
		}
	}
	if h.n > 0 {
		last, signed, err := h.read(h.n - 1)
		if err != nil {
			return nil, nil, err
		}
		h.end = last.offset + cpNoteHeader + int64(last.length)
		h.latestSize, h.latest = last.size, signed
		// A first record that does not hold is found by the reads
		// that need it (and Check); until then no size is below it.
		if first, ok, err := h.record(0); err != nil {
			return nil, nil, err
		} else if ok {
			h.firstSize = first.size
		}
	}
	if h.end > notesLen {
		return nil, nil, fmt.Errorf("%w: the checkpoint history's index ends at byte %d of %s, which has %d",
			ledger.ErrCorrupt, h.end, filepath.Join(dir, cpNotesFile), notesLen)
	}
	// Notes after the index's last record: appended and synced by an
	// append whose index record a crash lost, or cut short by one.
	indexed := 0
	for h.end < notesLen {
		var head [cpNoteHeader]byte
		n, err := h.notes.ReadAt(head[:], h.end)
		if n < len(head) && n < int(notesLen-h.end) {
			return nil, nil, fmt.Errorf("ledger: reading the checkpoint history: %w", err)
		}
		length := int64(binary.BigEndian.Uint32(head[8:]))
		rest := notesLen - h.end
		var whole []byte
		if n == len(head) && length <= maxCheckpointFile && rest >= cpNoteHeader+length {
			whole = make([]byte, cpNoteHeader+length)
			if _, err := h.notes.ReadAt(whole, h.end); err != nil {
				return nil, nil, fmt.Errorf("ledger: reading the checkpoint history: %w", err)
			}
		}
		if size, signed, ok := parseCPNote(whole); ok {
			if h.n > 0 && size < h.latestSize {
				return nil, nil, fmt.Errorf("%w: the checkpoint history's note at byte %d is for tree size %d, after one for %d",
					ledger.ErrCorrupt, h.end, size, h.latestSize)
			}
			if err := h.writeIndex(cpRecord{size: size, offset: h.end, length: uint32(length)}, signed); err != nil {
				return nil, nil, err
			}
			indexed++
			continue
		}
		// Not a whole record: torn if it is the last thing written, one
		// record at most, or nothing of its header reached the disk.
		if rest < cpNoteHeader || (length <= maxCheckpointFile && rest <= cpNoteHeader+length) || allZero(head[:]) && h.zerosFrom(h.end) {
			if err := h.notes.Truncate(h.end); err != nil {
				return nil, nil, fmt.Errorf("ledger: cutting the checkpoint history: %w", err)
			}
			repairs = append(repairs, fmt.Sprintf("cut the last %d bytes of the checkpoint history, a checkpoint whose write a crash cut short (never acknowledged)", rest))
			break
		}
		return nil, nil, fmt.Errorf("%w: the checkpoint history %s holds %d bytes at byte %d that are not a checkpoint (nothing was cut)",
			ledger.ErrCorrupt, filepath.Join(dir, cpNotesFile), rest, h.end)
	}
	if indexed > 0 {
		repairs = append(repairs, fmt.Sprintf("indexed the last %d checkpoints of the checkpoint history, whose index records a crash lost", indexed))
	}
	if len(repairs) > 0 {
		if err := h.index.Truncate(h.n * cpIndexRecord); err != nil {
			return nil, nil, fmt.Errorf("ledger: cutting the checkpoint history's index: %w", err)
		}
		if err := errors.Join(syncData(h.notes), syncData(h.index)); err != nil {
			return nil, nil, fmt.Errorf("ledger: syncing the checkpoint history: %w", err)
		}
	}
	return h, repairs, nil
}

func fileSize(f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("ledger: reading the checkpoint history: %w", err)
	}
	return info.Size(), nil
}

// zerosFrom reports whether notes holds only zeros from off to its end.
func (h *cpHistory) zerosFrom(off int64) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := h.notes.ReadAt(buf, off)
		if !allZero(buf[:n]) {
			return false
		}
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		off += int64(n)
	}
}

// writeIndex appends r, the record of signed, to the index, syncing it
// every cpIndexSync records, and makes it the last record. Only the
// appender calls it.
func (h *cpHistory) writeIndex(r cpRecord, signed []byte) error {
	if _, err := h.index.WriteAt(appendCPIndexRecord(nil, r), h.n*cpIndexRecord); err != nil {
		return fmt.Errorf("ledger: writing the checkpoint history's index: %w", err)
	}
	if (h.n+1)%cpIndexSync == 0 {
		if err := syncData(h.index); err != nil {
			return fmt.Errorf("ledger: syncing the checkpoint history's index: %w", err)
		}
	}
	h.mu.Lock()
	if h.n == 0 {
		h.firstSize = r.size
	}
	h.n++
	h.end = r.offset + cpNoteHeader + int64(r.length)
	h.latestSize, h.latest = r.size, signed
	h.mu.Unlock()
	return nil
}

// add appends the checkpoint signed for size, durably: its note, synced,
// then its index record, synced. The caller has checked that size is not
// below the latest's.
func (h *cpHistory) add(size uint64, signed []byte) error {
	h.mu.RLock()
	end := h.end
	h.mu.RUnlock()
	if _, err := h.notes.WriteAt(appendCPNote(make([]byte, 0, cpNoteHeader+len(signed)), size, signed), end); err != nil {
		return fmt.Errorf("ledger: writing the checkpoint history: %w", err)
	}
	if err := syncData(h.notes); err != nil {
		return fmt.Errorf("ledger: syncing the checkpoint history: %w", err)
	}
	return h.writeIndex(cpRecord{size: size, offset: end, length: uint32(len(signed))}, bytes.Clone(signed))
}

// last returns the latest checkpoint and its tree size; ok is false if
// the history is empty. signed must not be changed.
func (h *cpHistory) last() (size uint64, signed []byte, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.latestSize, h.latest, h.n > 0
}

// record reads index record i, reporting whether its checksum holds.
func (h *cpHistory) record(i int64) (cpRecord, bool, error) {
	var b [cpIndexRecord]byte
	if _, err := h.index.ReadAt(b[:], i*cpIndexRecord); err != nil {
		return cpRecord{}, false, fmt.Errorf("ledger: reading record %d of the checkpoint history's index: %w", i, err)
	}
	r, ok := parseCPIndexRecord(b[:])
	return r, ok, nil
}

// validRecord is record, a record that does not hold being ErrCorrupt.
func (h *cpHistory) validRecord(i int64) (cpRecord, error) {
	r, ok, err := h.record(i)
	if err == nil && !ok {
		err = fmt.Errorf("%w: record %d of the checkpoint history's index %s fails its checksum",
			ledger.ErrCorrupt, i, filepath.Join(h.dir, cpIndexFile))
	}
	return r, err
}

// readNote reads the note that index record r names and checks it
// against r and its own checksum.
func (h *cpHistory) readNote(r cpRecord) ([]byte, error) {
	if r.length > maxCheckpointFile {
		return nil, fmt.Errorf("%w: the checkpoint history's index gives the checkpoint for tree size %d a length of %d bytes",
			ledger.ErrCorrupt, r.size, r.length)
	}
	b := make([]byte, cpNoteHeader+int64(r.length))
	if _, err := h.notes.ReadAt(b, r.offset); errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: the checkpoint for tree size %d is past the end of the checkpoint history %s (byte %d)",
			ledger.ErrCorrupt, r.size, filepath.Join(h.dir, cpNotesFile), r.offset)
	} else if err != nil {
		return nil, fmt.Errorf("ledger: reading the checkpoint for tree size %d: %w", r.size, err)
	}
	size, signed, ok := parseCPNote(b)
	if !ok || size != r.size {
		return nil, fmt.Errorf("%w: the checkpoint for tree size %d, at byte %d of the checkpoint history %s, fails its checksum or is not the one its index names",
			ledger.ErrCorrupt, r.size, r.offset, filepath.Join(h.dir, cpNotesFile))
	}
	return signed, nil
}

// read returns index record i and its note, checked.
func (h *cpHistory) read(i int64) (cpRecord, []byte, error) {
	r, err := h.validRecord(i)
	if err != nil {
		return r, nil, err
	}
	signed, err := h.readNote(r)
	return r, signed, err
}

// get returns the checkpoint for exactly size, the later record of it if
// two are, or ok false. A size outside the first and last records' is
// answered without reading, the latest's from memory, any other by
// searching the index (search).
func (h *cpHistory) get(size uint64) (signed []byte, ok bool, err error) {
	h.mu.RLock()
	n, first, latestSize, latest := h.n, h.firstSize, h.latestSize, h.latest
	h.mu.RUnlock()
	switch {
	case n == 0 || size < first || size > latestSize:
		return nil, false, nil
	case size == latestSize:
		return bytes.Clone(latest), true, nil
	}
	r, found, err := h.search(n, first, latestSize, size)
	if err != nil || !found {
		return nil, false, err
	}
	signed, err = h.readNote(r)
	return signed, err == nil, err
}

// search finds the last of the n index records whose size is size, given
// that the first record's size, first, is at most size and the last's,
// last, above it. It probes where the sizes' spread puts size
// (interpolation: checkpoints come at a steady pace, so a probe usually
// lands within a few records of it) and a little past that probe, to
// bracket size within one read of cpSearchSpan records, which it then
// reads whole; a probe that fails to halve the range is followed by one
// at its middle, so that uneven sizes cost at most about twice a binary
// search.
func (h *cpHistory) search(n int64, first, last, size uint64) (cpRecord, bool, error) {
	// size[lo] <= size < size[hi]
	lo, hi, loSize, hiSize := int64(0), n-1, first, last
	interpolate := true
	probe := func(i int64) (bool, error) {
		r, err := h.validRecord(i)
		if err != nil {
			return false, err
		}
		if r.size <= size {
			lo, loSize = i, r.size
			return true, nil
		}
		hi, hiSize = i, r.size
		return false, nil
	}
	for hi-lo > cpSearchSpan {
		before := hi - lo
		pos := lo + (hi-lo)/2
		if interpolate {
			pos = lo + int64(float64(size-loSize)/float64(hiSize-loSize)*float64(hi-lo))
		}
		pos = min(max(pos, lo+1), hi-1)
		below, err := probe(pos)
		if err != nil {
			return cpRecord{}, false, err
		}
		if interpolate {
			next := max(pos-cpSearchSpan/2, lo+1)
			if below {
				next = min(pos+cpSearchSpan/2, hi-1)
			}
			if next > lo && next < hi {
				if _, err := probe(next); err != nil {
					return cpRecord{}, false, err
				}
			}
		}
		interpolate = hi-lo <= before/2
	}
	buf := make([]byte, (hi-lo+1)*cpIndexRecord)
	if _, err := h.index.ReadAt(buf, lo*cpIndexRecord); err != nil {
		return cpRecord{}, false, fmt.Errorf("ledger: reading the checkpoint history's index: %w", err)
	}
	var found cpRecord
	ok := false
	for i := range hi - lo + 1 {
		r, valid := parseCPIndexRecord(buf[i*cpIndexRecord:])
		if !valid {
			return cpRecord{}, false, fmt.Errorf("%w: record %d of the checkpoint history's index %s fails its checksum",
				ledger.ErrCorrupt, lo+i, filepath.Join(h.dir, cpIndexFile))
		}
		if r.size > size {
			break
		}
		if r.size == size {
			found, ok = r, true
		}
	}
	return found, ok, nil
}

// check reads the whole history, records and notes, against their
// checksums and each other: the notes follow each other with nothing
// between or after them, the sizes increase (a size repeated only by a
// checkpoint with signature lines added) and none exceeds treeSize, and
// the last is the checkpoint file's in storeDir (or older, by an
// AddCheckpoint under way).
func (h *cpHistory) check(storeDir string, treeSize uint64) error {
	h.mu.RLock()
	n, end, latestSize, latest := h.n, h.end, h.latestSize, h.latest
	h.mu.RUnlock()
	// After the snapshot: AddCheckpoint writes the file first.
	fileSize, fileCP, err := readCheckpointFile(storeDir)
	if err != nil {
		return err
	}
	var prev []byte
	var prevSize uint64
	var off int64
	buf := make([]byte, cpSearchSpan*cpIndexRecord)
	for i := int64(0); i < n; i += cpSearchSpan {
		k := min(n-i, cpSearchSpan)
		if _, err := h.index.ReadAt(buf[:k*cpIndexRecord], i*cpIndexRecord); err != nil {
			return fmt.Errorf("ledger: reading the checkpoint history's index: %w", err)
		}
		for j := range k {
			r, ok := parseCPIndexRecord(buf[j*cpIndexRecord:])
			switch {
			case !ok:
				return fmt.Errorf("%w: record %d of the checkpoint history's index fails its checksum", ledger.ErrCorrupt, i+j)
			case r.offset != off:
				return fmt.Errorf("%w: record %d of the checkpoint history's index is at byte %d of the notes, not %d", ledger.ErrCorrupt, i+j, r.offset, off)
			case r.size > treeSize:
				return fmt.Errorf("%w: the checkpoint history holds one for tree size %d, the tree has %d entries", ledger.ErrCorrupt, r.size, treeSize)
			case i+j > 0 && r.size < prevSize:
				return fmt.Errorf("%w: the checkpoint history holds one for tree size %d after one for %d", ledger.ErrCorrupt, r.size, prevSize)
			}
			signed, err := h.readNote(r)
			if err != nil {
				return err
			}
			if i+j > 0 && r.size == prevSize && !ledger.AddsSignatures(prev, signed) {
				return fmt.Errorf("%w: the checkpoint history holds two for tree size %d, the later not the earlier with signatures added", ledger.ErrCorrupt, r.size)
			}
			prev, prevSize, off = signed, r.size, off+cpNoteHeader+int64(r.length)
		}
	}
	if off != end {
		return fmt.Errorf("%w: the checkpoint history's index covers %d bytes of the notes, not %d", ledger.ErrCorrupt, off, end)
	}
	if n > 0 && (prevSize != latestSize || !bytes.Equal(prev, latest)) {
		return fmt.Errorf("%w: the checkpoint history's last checkpoint, for tree size %d, is not the one it serves as the latest", ledger.ErrCorrupt, prevSize)
	}
	switch {
	case n > 0 && fileCP == nil:
		return fmt.Errorf("%w: the checkpoint history holds checkpoints but there is no checkpoint file", ledger.ErrCorrupt)
	case n > 0 && (fileSize < latestSize || fileSize == latestSize && !bytes.Equal(fileCP, latest) && !ledger.AddsSignatures(latest, fileCP)):
		return fmt.Errorf("%w: the checkpoint file's checkpoint, for tree size %d, is older than the checkpoint history's latest, for %d, or differs from it",
			ledger.ErrCorrupt, fileSize, latestSize)
	}
	return nil
}

func (h *cpHistory) close() error {
	var errs []error
	if h.index != nil {
		errs = append(errs, syncData(h.index))
	}
	for _, f := range []*os.File{h.notes, h.index} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// removeTmpHistory removes what a migration a crash interrupted left.
func removeTmpHistory(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, cpHistoryTmpDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ledger: removing an unfinished checkpoint history: %w", err)
	}
	return nil
}

// openCheckpoints opens the store's checkpoint history, first moving the
// checkpoints of a store written before it out of badger ('c' keys, and
// the 'm' "checkpoint" key naming the latest), as the history's doc says.
func (s *Store) openCheckpoints(ctx context.Context, log *slog.Logger) error {
	if err := removeTmpHistory(s.dir); err != nil {
		return err
	}
	dir := filepath.Join(s.dir, cpHistoryDir)
	keys := 0 // 'c' keys seen; without a migration, whether there are any
	_, statErr := os.Stat(dir)
	migrate := errors.Is(statErr, fs.ErrNotExist)
	if statErr != nil && !migrate {
		return fmt.Errorf("ledger: opening the checkpoint history: %w", statErr)
	}
	var tmp *cpHistory
	defer func() {
		if tmp != nil {
			tmp.close()
		}
	}()
	if migrate {
		var err error
		if tmp, _, err = openCPHistory(filepath.Join(s.dir, cpHistoryTmpDir)); err != nil {
			return err
		}
	}
	err := s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixCheckpoint}, PrefetchValues: migrate})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			keys++
			if !migrate {
				break
			}
			key := item.Key()
			if len(key) != 9 {
				return fmt.Errorf("%w: a checkpoint key of %d bytes in the index", ledger.ErrCorrupt, len(key))
			}
			if err := item.Value(func(v []byte) error {
				return tmp.appendUnsynced(binary.BigEndian.Uint64(key[1:]), v)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: moving the checkpoints from the index to %s: %w", cpHistoryDir, err)
	}
	if migrate {
		err = errors.Join(syncData(tmp.notes), syncData(tmp.index), syncDir(tmp.dir))
		if cerr := tmp.close(); err == nil {
			err = cerr
		}
		tmp = nil
		if err == nil {
			err = os.Rename(filepath.Join(s.dir, cpHistoryTmpDir), dir)
		}
		if err == nil {
			err = syncDir(s.dir)
		}
		if err != nil {
			return fmt.Errorf("ledger: moving the checkpoints from the index to %s: %w", cpHistoryDir, err)
		}
	}
	if keys > 0 {
		// No other badger writer runs yet.
		err := s.db.DropPrefix([]byte{prefixCheckpoint})
		if err == nil {
			err = s.db.Update(func(txn *badgerdb.Txn) error { return txn.Delete(keyLatestCheckpoint) })
		}
		if err == nil {
			err = s.db.Sync()
		}
		if err != nil {
			return fmt.Errorf("ledger: deleting the checkpoints moved to %s from the index: %w", cpHistoryDir, err)
		}
		if migrate {
			log.InfoContext(ctx, "ledger: moved the signed checkpoints from the index to their files",
				slog.Int("checkpoints", keys), slog.String("dir", cpHistoryDir))
		}
	}
	h, repairs, err := openCPHistory(dir)
	if err != nil {
		return err
	}
	s.cps = h
	for _, r := range repairs {
		log.WarnContext(ctx, "ledger: "+r)
	}
	s.repairs = append(s.repairs, repairs...)
	return nil
}

// appendUnsynced appends the checkpoint signed for size without a sync,
// for a migration, which syncs once at the end. Sizes must not decrease.
func (h *cpHistory) appendUnsynced(size uint64, signed []byte) error {
	if _, err := h.notes.WriteAt(appendCPNote(nil, size, signed), h.end); err != nil {
		return fmt.Errorf("ledger: writing the checkpoint history: %w", err)
	}
	r := cpRecord{size: size, offset: h.end, length: uint32(len(signed))}
	if _, err := h.index.WriteAt(appendCPIndexRecord(nil, r), h.n*cpIndexRecord); err != nil {
		return fmt.Errorf("ledger: writing the checkpoint history's index: %w", err)
	}
	h.n++
	h.end += cpNoteHeader + int64(len(signed))
	return nil
}
