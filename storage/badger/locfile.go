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

// Where each entry is in the frame log lives in one plain file,
// locations, in the store's directory, written with pwrite and read with
// pread, and not in badger: one record per entry, which in badger's
// memory-mapped tables (the 'f' keys of the layout before this file)
// grew the process's RSS with the log as the tiles and leaf hashes had
// (docs/log.md §5, docs/performance.md "Memory"). Read with pread, its
// pages are the kernel's page cache.
//
// Record i, at byte 20·i, locates entry i; integers are big-endian:
//
//	u64 log position of the entry's bytes
//	u32 length of the entry
//	u32 CRC-32C (Castagnoli) of the entry's bytes
//	u32 CRC-32C of the entry's index (u64) and the 16 bytes before
//
// For example, entry 7, the 5 bytes "hello" at log position 4096, has the
// record (hex) 0000000000001000 00000005 9a71bb4c 542b75e9, at byte 140.
// The last checksum covers the index, so a record written to another
// slot fails it too. A record that fails it, one of zeros (a hole, or a
// slot the crash lost; no entry is at log position 0), and one beyond the
// end of the file, for an entry below the tree size, are damage
// (ledger.ErrCorrupt), never ledger.ErrNotFound and never another entry.
// So Entry reads one record and then the entry's bytes, and ReadEntries
// the records of its range at once.
//
// The records are derived from the frames, which are the durable copy.
// The indexer writes a frame's records with one pwrite, before its index
// in badger and without a sync; the file is synced before the index
// records, with the "locations" mark, that the records of the frames up
// to a log position are in it, along with the number of records the file
// then held. The mark is written with the tiles mark (tilesDone): every
// tile flush, and when recovery ends. Open refuses a file with fewer
// records than the mark (records lost that no frame replay rewrites), and
// rewrites the records of the frames after the mark (recover), those a
// crash may have lost.
//
// A store written before this file keeps its locations in badger, one
// 'f' key per frame (u64 first index; the log position of the first
// entry's bytes, then per entry u32 length and u32 CRC-32C, the entries
// contiguous). Open moves them (migrateLocations): it writes their
// records, syncs the file, then deletes the keys and records the mark in
// badger. A crash before the last deletion leaves keys, which the next
// Open moves again.
const (
	locationsFile = "locations"
	locRecordSize = 20
	// locReadChunk is how many records ReadEntries reads at once (320 KiB).
	locReadChunk = 1 << 14
	// prefixFrame is the kind of the 'f' keys of the layout before the
	// locations file, which Open moves into it.
	prefixFrame = 'f'
)

// keyLocations is the locations mark: u64 log position up to which the
// locations file holds the records of every frame, u64 records in the
// file when it was synced for the mark.
var keyLocations = []byte{prefixMeta, 'l', 'o', 'c', 'a', 't', 'i', 'o', 'n', 's'}

// locationFile is a store's locations file. The indexer (or Open, before
// it starts) writes it from one goroutine; reads come from any.
type locationFile struct {
	path string
	f    *os.File

	mu   sync.Mutex
	size int64 // bytes, as found at open and written since
	// dirty says whether records were written since the last sync; only
	// the writer touches it.
	dirty bool
}

// openLocationFile opens the locations file in dir, creating it, and
// making its name durable, if it is missing.
func openLocationFile(dir string) (*locationFile, error) {
	path := filepath.Join(dir, locationsFile)
	_, err := os.Lstat(path)
	created := errors.Is(err, fs.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening the locations file: %w", err)
	}
	info, err := f.Stat()
	if err == nil && created {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger: opening the locations file: %w", err)
	}
	return &locationFile{path: path, f: f, size: info.Size()}, nil
}

// appendLocation appends record index, locating loc, to b; sum is
// scratch space for locationSum.
func appendLocation(b []byte, sum *[24]byte, index uint64, loc entryLocation) []byte {
	at := len(b)
	b = binary.BigEndian.AppendUint64(b, uint64(loc.pos))
	b = binary.BigEndian.AppendUint32(b, loc.length)
	b = binary.BigEndian.AppendUint32(b, loc.crc)
	return binary.BigEndian.AppendUint32(b, locationSum(sum, index, b[at:]))
}

// locationSum is the checksum of record index whose first 16 bytes are
// rec, computed in scratch (one per call of write or read: a local array
// would escape to the heap through crc32, once per record).
func locationSum(scratch *[24]byte, index uint64, rec []byte) uint32 {
	binary.BigEndian.PutUint64(scratch[:], index)
	copy(scratch[8:], rec[:16])
	return crc32.Checksum(scratch[:], castagnoli)
}

// write writes the records of the entries from start, located at locs
// (absolute log positions), with one pwrite.
func (lf *locationFile) write(start uint64, locs []entryLocation) error {
	if start > (1<<62)/locRecordSize {
		return fmt.Errorf("ledger: the location of entry %d is beyond any log", start)
	}
	b := make([]byte, 0, len(locs)*locRecordSize)
	var sum [24]byte
	for i, loc := range locs {
		b = appendLocation(b, &sum, start+uint64(i), loc)
	}
	off := int64(start) * locRecordSize
	if _, err := lf.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("ledger: writing the locations of %s to %s: %w", entriesName(start, start+uint64(len(locs))), lf.path, err)
	}
	lf.mu.Lock()
	lf.size = max(lf.size, off+int64(len(b)))
	lf.mu.Unlock()
	lf.dirty = true
	return nil
}

// read fills locs with the locations of the entries from start, with one
// pread, checking each record.
func (lf *locationFile) read(start uint64, locs []entryLocation) error {
	if len(locs) == 0 {
		return nil
	}
	end := start + uint64(len(locs))
	lf.mu.Lock()
	records := uint64(lf.size) / locRecordSize
	lf.mu.Unlock()
	if end > records {
		return fmt.Errorf("%w: entry %d's location is missing: %s holds the records of %d entries", ledger.ErrCorrupt, max(start, records), lf.path, records)
	}
	b := make([]byte, len(locs)*locRecordSize)
	switch _, err := lf.f.ReadAt(b, int64(start)*locRecordSize); {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the locations of %s: %s is shorter than the %d bytes written to it", ledger.ErrCorrupt, entriesName(start, end), lf.path, records*locRecordSize)
	case err != nil:
		return fmt.Errorf("ledger: reading the locations of %s: %w", entriesName(start, end), err)
	}
	var sum [24]byte
	for i := range locs {
		rec := b[i*locRecordSize : (i+1)*locRecordSize]
		index := start + uint64(i)
		switch {
		case allZero(rec):
			return fmt.Errorf("%w: entry %d's location is missing: its record in %s is zeros", ledger.ErrCorrupt, index, lf.path)
		case locationSum(&sum, index, rec) != binary.BigEndian.Uint32(rec[16:]):
			return fmt.Errorf("%w: entry %d's location record in %s fails its checksum", ledger.ErrCorrupt, index, lf.path)
		}
		locs[i] = entryLocation{
			pos:    int64(binary.BigEndian.Uint64(rec)),
			length: binary.BigEndian.Uint32(rec[8:]),
			crc:    binary.BigEndian.Uint32(rec[12:]),
		}
	}
	return nil
}

// entriesName names the entries [start, end) in a message.
func entriesName(start, end uint64) string {
	if end == start+1 {
		return fmt.Sprintf("entry %d", start)
	}
	return fmt.Sprintf("entries %d to %d", start, end-1)
}

// records returns how many records the file holds.
func (lf *locationFile) records() uint64 {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return uint64(lf.size) / locRecordSize
}

// sync makes the records written since the last sync durable.
func (lf *locationFile) sync() error {
	if !lf.dirty {
		return nil
	}
	if err := syncData(lf.f); err != nil {
		return fmt.Errorf("ledger: syncing %s: %w", lf.path, err)
	}
	lf.dirty = false
	return nil
}

func (lf *locationFile) close() error { return lf.f.Close() }

// readLocationsMark returns the locations mark: the log position up to
// which the file holds every frame's records, and how many records it
// held then (absent: 0, 0).
func readLocationsMark(txn *badgerdb.Txn) (end, records uint64, err error) {
	v, err := getValue(txn, keyLocations)
	switch {
	case errors.Is(err, badgerdb.ErrKeyNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, err
	case len(v) != 16:
		return 0, 0, fmt.Errorf("%w: the index's locations mark is %d bytes, not 16", ledger.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), nil
}

// locationsDone records in w's transaction that the locations file holds
// the records of the frames up to log position end, after syncing it:
// badger may make the record durable at any time, so the file must be
// durable first.
func (s *Store) locationsDone(w *indexWriter, end int64) {
	if w.err != nil {
		return
	}
	if w.err = s.locations.sync(); w.err == nil {
		v := binary.BigEndian.AppendUint64(nil, uint64(end))
		w.set(keyLocations, binary.BigEndian.AppendUint64(v, s.locations.records()))
	}
}

// openLocations opens the locations file, refuses it if it holds fewer
// records than the mark says were synced, and moves the locations of a
// store written before the file out of badger into it.
func (s *Store) openLocations(ctx context.Context, log *slog.Logger) error {
	var records uint64
	if err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		_, records, err = readLocationsMark(txn)
		return err
	}); err != nil {
		return fmt.Errorf("ledger: reading the index: %w", err)
	}
	path := filepath.Join(s.dir, locationsFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) && records > 0 {
		// Refused before the file is made again.
		return fmt.Errorf("%w: %s is missing, but the locations of %d entries were written and synced to it; "+
			"it was removed after its sync: restore the store directory from a backup", ledger.ErrCorrupt, path, records)
	}
	var err error
	if s.locations, err = openLocationFile(s.dir); err != nil {
		return err
	}
	if n := s.locations.records(); n < records {
		return fmt.Errorf("%w: %s holds the locations of %d entries, but %d were written and synced; "+
			"it was cut or replaced after its sync: restore the store directory from a backup", ledger.ErrCorrupt, s.locations.path, n, records)
	}
	return s.migrateLocations(ctx, log)
}

// migrateChunk is how many 'f' keys migrateLocations moves at a time, so
// that the keys it holds in memory stay few (a store of frames of one
// entry has a key per entry). A variable for the tests.
var migrateChunk = 1 << 14

// migrateLocations moves the 'f' keys of a store written before the
// locations file into it, migrateChunk keys at a time: it writes their
// records, syncs the file, and then deletes the keys; the last
// transaction records the mark, if the index has none. Keys a crash left
// are moved again; once none is left, this is one seek.
func (s *Store) migrateLocations(ctx context.Context, log *slog.Logger) error {
	var logEnd uint64
	hasMark := false
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		if logEnd, _, err = getUint64(txn, keyLogEnd); err != nil {
			return err
		}
		switch _, err := txn.Get(keyLocations); {
		case err == nil:
			hasMark = true
		case !errors.Is(err, badgerdb.ErrKeyNotFound):
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: reading the index: %w", err)
	}
	moved := 0
	for from := []byte{prefixFrame}; ; {
		keys, err := s.moveFrameKeys(from)
		if err != nil {
			return fmt.Errorf("ledger: moving the entry locations from the index to %s: %w", locationsFile, err)
		}
		if len(keys) == 0 && moved == 0 {
			return nil
		}
		last := len(keys) < migrateChunk
		w := indexWriter{db: s.db, txn: s.db.NewTransaction(true)}
		for _, key := range keys {
			w.delete(key)
		}
		if last && !hasMark {
			// The index of every frame up to logEnd is durable, its 'f'
			// key in its first transaction, so the file holds their
			// records now.
			s.locationsDone(&w, int64(logEnd))
		}
		if w.err == nil {
			w.err = w.txn.Commit()
		}
		w.txn.Discard()
		if w.err != nil {
			return fmt.Errorf("ledger: deleting the entry locations moved to %s from the index: %w", locationsFile, w.err)
		}
		moved += len(keys)
		if last {
			break
		}
		from = keys[len(keys)-1]
	}
	log.InfoContext(ctx, "ledger: moved the entry locations from the index to their file",
		slog.Int("frames", moved), slog.Uint64("entries", s.locations.records()), slog.String("file", locationsFile))
	return nil
}

// moveFrameKeys writes the records of up to migrateChunk 'f' keys from
// the key from on (a key already moved is passed over), syncs the file,
// and returns the keys.
func (s *Store) moveFrameKeys(from []byte) ([][]byte, error) {
	var keys [][]byte
	err := s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixFrame}})
		defer it.Close()
		for it.Seek(from); it.Valid() && len(keys) < migrateChunk; it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			if bytes.Equal(key, from) {
				continue
			}
			if len(key) != 9 {
				return fmt.Errorf("%w: a frame key of %d bytes", ledger.ErrCorrupt, len(key))
			}
			start := binary.BigEndian.Uint64(key[1:])
			if err := item.Value(func(v []byte) error {
				locs, err := parseFrameIndex(v)
				if err != nil {
					return fmt.Errorf("the frame of entry %d: %w", start, err)
				}
				return s.locations.write(start, locs)
			}); err != nil {
				return err
			}
			keys = append(keys, key)
		}
		return nil
	})
	if err == nil && len(keys) > 0 {
		err = s.locations.sync()
	}
	return keys, err
}

// parseFrameIndex reads the value of an 'f' key (see migrateLocations).
func parseFrameIndex(b []byte) ([]entryLocation, error) {
	if len(b) < 16 || (len(b)-8)%8 != 0 {
		return nil, fmt.Errorf("%w: a frame index of %d bytes", ledger.ErrCorrupt, len(b))
	}
	pos := int64(binary.BigEndian.Uint64(b))
	locs := make([]entryLocation, 0, (len(b)-8)/8)
	for rest := b[8:]; len(rest) > 0; rest = rest[8:] {
		l := entryLocation{pos: pos, length: binary.BigEndian.Uint32(rest), crc: binary.BigEndian.Uint32(rest[4:])}
		locs = append(locs, l)
		pos += int64(l.length)
	}
	return locs, nil
}
