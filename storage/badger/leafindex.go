package badger

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
)

// The leaf-hash index (IndexOf) keeps all but the latest leaf hashes in
// plain files in the store's leaves/ directory, read with pread, and not
// in badger: a leaf hash is 32 random bytes per entry, which in badger's
// memory-mapped tables made the largest part of what grew with the log and
// stayed resident in the process (docs/log.md §5).
//
// It is a list of runs, each the leaf hashes of the entries [first, end)
// sorted by (hash, index), in a file named by that range
// (first-end.leaves, 20 decimal digits each), written whole, synced and
// renamed into place, and never changed; and, in badger as before, the
// leaf hashes of the entries after the last run, written with each
// frame's index ('h' keys). Once leafRunSize entries follow the runs, the
// indexer writes their keys as a run, then deletes them from badger; keys
// a crash left behind are below the runs' end, where lookups find the
// runs first, and are deleted with the next run's. A background merger
// merges the last two runs while the later one is more than half the size
// of the one before it, so that sizes at least halve from the oldest run
// to the newest and a log of n entries has at most about
// log2(n/leafRunSize)+1 runs, each searched with one read, rarely two.
// Only the lowest index under a hash is kept (IndexOf returns it).
//
// A run file is blocks of leafBlockSize bytes, then a footer:
//
//	block:  up to leafPerBlock records of 40 bytes (32-byte leaf hash,
//	        u64 index), zeros up to byte 4088, u32 record count, u32
//	        CRC-32C of the 4,092 bytes before it
//	footer: u64 first hash bytes (big-endian prefix) of each block's first
//	        record, then u64 records, u64 blocks, u32 CRC-32C of the
//	        footer before it, and the 4 bytes "LEAF"
//
// The footer's prefixes are read into memory at open (8 bytes per 102
// entries). Integers are big-endian.
const (
	leavesDir     = "leaves"
	leafBlockSize = 4096
	leafRecSize   = ledger.HashSize + 8
	leafPerBlock  = (leafBlockSize - 8) / leafRecSize
	leafMagic     = "LEAF"
	leafTrailer   = 8 + 8 + 4 + 4
)

// leafRunSize is how many entries' leaf hashes gather in badger before
// they are written as a run: about 1 MiB of badger's tables, and a run
// written about once a second at full speed. A variable for the tests.
var leafRunSize uint64 = 1 << 14

// leafMergesOff stops merges from starting; for the tests.
var leafMergesOff bool

type leafRun struct {
	first, end uint64 // entries [first, end)
	f          *os.File
	fences     []uint64 // the first 8 bytes of each block's first hash
}

func (r *leafRun) name() string { return leafRunName(r.first, r.end) }

func leafRunName(first, end uint64) string { return fmt.Sprintf("%020d-%020d.leaves", first, end) }

// leafIndex is a store's leaf-hash index.
type leafIndex struct {
	dir    string
	logger *slog.Logger

	// mu guards the fields below; lookups hold it for reading while
	// they read the runs and badger, so that the merger closes no file
	// under them and a run's keys are not deleted from badger between.
	mu   sync.RWMutex
	runs []*leafRun // ordered, contiguous from entry 0
	err  error      // a failed background merge, reported by indexed

	merging bool
	merged  sync.WaitGroup
	stop    bool
}

// openLeafIndex opens the runs in dir, creating dir if need be; it
// removes unfinished and merged-over files.
func openLeafIndex(dir string, logger *slog.Logger) (*leafIndex, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating the leaf-hash index directory: %w", err)
	}
	li := &leafIndex{dir: dir, logger: logger}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading the leaf-hash index directory: %w", err)
	}
	type span struct{ first, end uint64 }
	var spans []span
	for _, d := range names {
		name := d.Name()
		if strings.HasSuffix(name, ".tmp") {
			// A run or merge a crash cut short.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("ledger: removing an unfinished leaf-hash run: %w", err)
			}
			continue
		}
		first, end, ok := parseLeafRunName(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not a leaf-hash run", ledger.ErrCorrupt, filepath.Join(dir, name))
		}
		spans = append(spans, span{first, end})
	}
	// Longest first among those starting together: a merge's output
	// covers its inputs, which a crash may have left behind.
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(b.end, a.end))
	})
	for _, sp := range spans {
		path := filepath.Join(dir, leafRunName(sp.first, sp.end))
		switch {
		case sp.first < li.end() && sp.end <= li.end():
			if err := os.Remove(path); err != nil {
				li.close()
				return nil, fmt.Errorf("ledger: removing a merged leaf-hash run: %w", err)
			}
			continue
		case sp.first != li.end():
			err := fmt.Errorf("%w: the leaf-hash runs in %s cover the entries up to %d, then %s", ledger.ErrCorrupt, dir, li.end(), path)
			if sp.first > li.end() {
				err = fmt.Errorf("%w: the run of entries [%d, %d) is missing", err, li.end(), sp.first)
			}
			li.close() // which forgets the runs, and their end
			return nil, err
		}
		r, err := openLeafRun(path, sp.first, sp.end)
		if err != nil {
			li.close()
			return nil, err
		}
		li.runs = append(li.runs, r)
	}
	// Merges a close cut short.
	li.mu.Lock()
	li.startMerger()
	li.mu.Unlock()
	return li, nil
}

func parseLeafRunName(name string) (first, end uint64, ok bool) {
	a, b, ok := strings.Cut(strings.TrimSuffix(name, ".leaves"), "-")
	if !ok || !strings.HasSuffix(name, ".leaves") || len(a) != 20 || len(b) != 20 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseUint(a, 10, 64)
	end, err2 := strconv.ParseUint(b, 10, 64)
	return first, end, err1 == nil && err2 == nil && first < end
}

// openLeafRun opens a run file and reads its footer.
func openLeafRun(path string, first, end uint64) (*leafRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening a leaf-hash run: %w", err)
	}
	r, err := readLeafFooter(f, first, end)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: leaf-hash run %s: %w", ledger.ErrCorrupt, path, err)
	}
	return r, nil
}

func readLeafFooter(f *os.File, first, end uint64) (*leafRun, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	var t [leafTrailer]byte
	if size < leafTrailer {
		return nil, errors.New("shorter than its footer")
	}
	if _, err := f.ReadAt(t[:], size-leafTrailer); err != nil {
		return nil, err
	}
	records, blocks := binary.BigEndian.Uint64(t[0:]), binary.BigEndian.Uint64(t[8:])
	// Fewer records than entries only if leaf hashes repeat: only the
	// lowest index under a hash is kept.
	if string(t[20:]) != leafMagic || records > end-first || records == 0 || blocks != (records+leafPerBlock-1)/leafPerBlock ||
		uint64(size) != blocks*leafBlockSize+blocks*8+leafTrailer {
		return nil, fmt.Errorf("a footer of %d records in %d blocks for the %d entries [%d, %d) in a file of %d bytes", records, blocks, end-first, first, end, size)
	}
	footer := make([]byte, blocks*8+leafTrailer)
	if _, err := f.ReadAt(footer, int64(blocks*leafBlockSize)); err != nil {
		return nil, err
	}
	n := len(footer) - 4 - len(leafMagic)
	if crc32.Checksum(footer[:n], castagnoli) != binary.BigEndian.Uint32(footer[n:]) {
		return nil, errors.New("its footer fails its checksum")
	}
	r := &leafRun{first: first, end: end, f: f, fences: make([]uint64, blocks)}
	for i := range r.fences {
		r.fences[i] = binary.BigEndian.Uint64(footer[8*i:])
	}
	return r, nil
}

// leafRecord is a leaf hash and its entry's index.
type leafRecord struct {
	hash  [ledger.HashSize]byte
	index uint64
}

func compareLeaf(a, b leafRecord) int {
	return cmp.Or(bytes.Compare(a.hash[:], b.hash[:]), cmp.Compare(a.index, b.index))
}

// leafRunWriter writes a run file: blocks, then the footer.
type leafRunWriter struct {
	w       *bufio.Writer
	block   []byte
	n       int // records in block
	fences  []uint64
	records uint64
	last    leafRecord
}

func newLeafRunWriter(f *os.File) *leafRunWriter {
	return &leafRunWriter{w: bufio.NewWriterSize(f, 64<<10), block: make([]byte, leafBlockSize)}
}

func (w *leafRunWriter) add(r leafRecord) error {
	if w.records > 0 && compareLeaf(w.last, r) >= 0 {
		return fmt.Errorf("%w: leaf-hash records out of order (entry %d after %d)", ledger.ErrCorrupt, r.index, w.last.index)
	}
	if w.n == 0 {
		w.fences = append(w.fences, binary.BigEndian.Uint64(r.hash[:8]))
	}
	copy(w.block[w.n*leafRecSize:], r.hash[:])
	binary.BigEndian.PutUint64(w.block[w.n*leafRecSize+ledger.HashSize:], r.index)
	w.n++
	w.records++
	w.last = r
	if w.n == leafPerBlock {
		return w.flushBlock()
	}
	return nil
}

func (w *leafRunWriter) flushBlock() error {
	clear(w.block[w.n*leafRecSize : leafBlockSize-8])
	binary.BigEndian.PutUint32(w.block[leafBlockSize-8:], uint32(w.n))
	binary.BigEndian.PutUint32(w.block[leafBlockSize-4:], crc32.Checksum(w.block[:leafBlockSize-4], castagnoli))
	w.n = 0
	_, err := w.w.Write(w.block)
	return err
}

func (w *leafRunWriter) finish() error {
	if w.n > 0 {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	footer := make([]byte, 0, 8*len(w.fences)+leafTrailer)
	for _, p := range w.fences {
		footer = binary.BigEndian.AppendUint64(footer, p)
	}
	footer = binary.BigEndian.AppendUint64(footer, w.records)
	footer = binary.BigEndian.AppendUint64(footer, uint64(len(w.fences)))
	footer = binary.BigEndian.AppendUint32(footer, crc32.Checksum(footer, castagnoli))
	footer = append(footer, leafMagic...)
	if _, err := w.w.Write(footer); err != nil {
		return err
	}
	return w.w.Flush()
}

// createRun writes the run of entries [first, end) from the records next
// yields in order: to a .tmp file, synced, renamed into place, and the
// directory synced. It returns the run, open.
func (li *leafIndex) createRun(first, end uint64, each func(add func(leafRecord) error) error) (*leafRun, error) {
	path := filepath.Join(li.dir, leafRunName(first, end))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: writing a leaf-hash run: %w", err)
	}
	w := newLeafRunWriter(f)
	err = each(w.add)
	if err == nil && w.records > end-first {
		err = fmt.Errorf("ledger: a leaf-hash run of %d records for the %d entries [%d, %d)", w.records, end-first, first, end)
	}
	if err == nil {
		err = w.finish()
	}
	if err == nil {
		err = syncData(f)
	}
	f.Close()
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(li.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("ledger: writing the leaf-hash run [%d, %d): %w", first, end, err)
	}
	return openLeafRun(path, first, end)
}

// end is the entry after the runs. Called with mu held, or before the
// merger may run (it replaces runs in place).
func (li *leafIndex) end() uint64 {
	if len(li.runs) == 0 {
		return 0
	}
	return li.runs[len(li.runs)-1].end
}

// runsEnd is end for callers that do not hold mu: once open, the index
// may be merging runs that a close cut short.
func (li *leafIndex) runsEnd() uint64 {
	li.mu.RLock()
	defer li.mu.RUnlock()
	return li.end()
}

// indexed tells the index that badger now indexes the entries below size
// (called by the indexer after each frame); it writes a run when
// leafRunSize of them follow the runs.
func (li *leafIndex) indexed(db *badgerdb.DB, size uint64) error {
	li.mu.RLock()
	err, end := li.err, li.end()
	li.mu.RUnlock()
	if err != nil || size-end < leafRunSize {
		return err
	}
	return li.flush(db, size)
}

// flush writes the leaf hashes badger holds of the entries from the runs'
// end up to size as a run, then deletes every leaf-hash key from badger (a
// first run over a whole older store's drops the prefix instead), and
// starts the merger if the runs call for it. Called by the indexer, when
// badger holds the keys of every entry below size and none above, or by
// Open before recovery, which writes again the keys of the frames after
// the indexed ones.
func (li *leafIndex) flush(db *badgerdb.DB, size uint64) error {
	li.mu.RLock()
	first := li.end()
	li.mu.RUnlock()
	var last leafRecord
	var n int
	// A first run over a whole older store's keys drops the prefix;
	// otherwise the keys read are deleted, about a run's worth.
	drop := first == 0 && size > 4*leafRunSize
	var keys [][]byte
	r, err := li.createRun(first, size, func(add func(leafRecord) error) error {
		return db.View(func(txn *badgerdb.Txn) error {
			it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixLeafHash}})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				key := it.Item().Key()
				if len(key) != 1+ledger.HashSize+8 {
					return fmt.Errorf("%w: a leaf-hash key of %d bytes", ledger.ErrCorrupt, len(key))
				}
				if !drop {
					keys = append(keys, it.Item().KeyCopy(nil))
				}
				var rec leafRecord
				copy(rec.hash[:], key[1:])
				rec.index = binary.BigEndian.Uint64(key[1+ledger.HashSize:])
				switch {
				case rec.index < first || rec.index >= size:
					// Left by a crash after a run was written, or of a
					// frame badger indexed in part.
					continue
				case n > 0 && rec.hash == last.hash:
					continue // a repeated hash: the lowest index only
				}
				if err := add(rec); err != nil {
					return err
				}
				last = rec
				n++
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	li.mu.Lock()
	li.runs = append(li.runs, r)
	li.startMerger()
	li.mu.Unlock()
	// Lookups find these entries in the run from here on.
	if drop {
		if err := db.DropPrefix([]byte{prefixLeafHash}); err != nil {
			return fmt.Errorf("ledger: dropping the leaf hashes written to a run from badger: %w", err)
		}
	}
	w := indexWriter{db: db, txn: db.NewTransaction(true)}
	defer func() { w.txn.Discard() }()
	// The run is durable: record that the runs reach size, so that a
	// run file lost later is found missing at Open.
	w.set(keyLeavesEnd, binary.BigEndian.AppendUint64(nil, size))
	for _, k := range keys {
		w.delete(k)
	}
	err = w.err
	if err == nil {
		err = w.txn.Commit()
	}
	if err != nil {
		return fmt.Errorf("ledger: deleting the leaf hashes written to a run from badger: %w", err)
	}
	return nil
}

// mergeable returns the position of the first of two runs to merge, or -1:
// the oldest pair whose later run is more than half the size of the
// earlier, so that merging keeps sizes at least halving. Called with mu
// held.
func (li *leafIndex) mergeable() int {
	for i := 0; i+1 < len(li.runs); i++ {
		a, b := li.runs[i], li.runs[i+1]
		if 2*(b.end-b.first) > a.end-a.first {
			return i
		}
	}
	return -1
}

// startMerger starts the merger if runs call for merging and it is not
// running. Called with mu held.
func (li *leafIndex) startMerger() {
	if !li.merging && !li.stop && !leafMergesOff && li.mergeable() >= 0 {
		li.merging = true
		li.merged.Add(1)
		go li.merge()
	}
}

// merge merges runs until none call for it, or the index is closing.
func (li *leafIndex) merge() {
	defer li.merged.Done()
	for {
		li.mu.Lock()
		i := -1
		if !li.stop {
			i = li.mergeable()
		}
		if i < 0 {
			li.merging = false
			li.mu.Unlock()
			return
		}
		a, b := li.runs[i], li.runs[i+1]
		li.mu.Unlock()
		// The runs are never changed, and only this goroutine removes
		// them: they can be read without the lock.
		r, err := li.createRun(a.first, b.end, func(add func(leafRecord) error) error {
			return mergeRuns(a, b, add)
		})
		li.mu.Lock()
		if err != nil {
			li.err, li.merging = err, false
			li.mu.Unlock()
			li.logger.Error("ledger: merging leaf-hash runs failed", slog.Any("err", err))
			return
		}
		li.runs = slices.Replace(li.runs, i, i+2, r)
		li.mu.Unlock()
		for _, old := range []*leafRun{a, b} {
			old.f.Close()
			if err := os.Remove(filepath.Join(li.dir, old.name())); err != nil {
				// Open removes it: it is covered by the merged run.
				li.logger.Warn("ledger: removing a merged leaf-hash run", slog.Any("err", err))
			}
		}
	}
}

// mergeRuns yields the records of a and b in order.
func mergeRuns(a, b *leafRun, add func(leafRecord) error) error {
	ra, rb := newRunReader(a), newRunReader(b)
	x, okA, err := ra.next()
	if err != nil {
		return err
	}
	y, okB, err := rb.next()
	if err != nil {
		return err
	}
	for okA || okB {
		if okA && (!okB || compareLeaf(x, y) < 0) {
			if err := add(x); err != nil {
				return err
			}
			if x, okA, err = ra.next(); err != nil {
				return err
			}
		} else {
			if err := add(y); err != nil {
				return err
			}
			if y, okB, err = rb.next(); err != nil {
				return err
			}
		}
	}
	return nil
}

// runReader reads a run's records in order.
type runReader struct {
	r     *leafRun
	buf   []byte // blocks read ahead
	block int    // next block to read
	recs  []byte // records left in the current block
}

func newRunReader(r *leafRun) *runReader { return &runReader{r: r} }

func (rr *runReader) next() (leafRecord, bool, error) {
	for len(rr.recs) == 0 {
		if rr.block >= len(rr.r.fences) {
			return leafRecord{}, false, nil
		}
		if len(rr.buf) == 0 {
			n := min(16, len(rr.r.fences)-rr.block)
			rr.buf = make([]byte, n*leafBlockSize)
			if _, err := rr.r.f.ReadAt(rr.buf, int64(rr.block)*leafBlockSize); err != nil {
				return leafRecord{}, false, fmt.Errorf("ledger: reading leaf-hash run %s: %w", rr.r.name(), err)
			}
		}
		recs, err := rr.r.checkBlock(rr.buf[:leafBlockSize], rr.block)
		if err != nil {
			return leafRecord{}, false, err
		}
		rr.recs, rr.buf = recs, rr.buf[leafBlockSize:]
		rr.block++
	}
	var rec leafRecord
	copy(rec.hash[:], rr.recs)
	rec.index = binary.BigEndian.Uint64(rr.recs[ledger.HashSize:])
	rr.recs = rr.recs[leafRecSize:]
	return rec, true, nil
}

// checkBlock checks block k's checksum and returns its records.
func (r *leafRun) checkBlock(b []byte, k int) ([]byte, error) {
	n := int(binary.BigEndian.Uint32(b[leafBlockSize-8:]))
	if crc32.Checksum(b[:leafBlockSize-4], castagnoli) != binary.BigEndian.Uint32(b[leafBlockSize-4:]) || n == 0 || n > leafPerBlock {
		return nil, fmt.Errorf("%w: leaf-hash run %s: block %d fails its checksum", ledger.ErrCorrupt, r.name(), k)
	}
	return b[:n*leafRecSize], nil
}

// find returns the lowest index under h in the run.
func (r *leafRun) find(h [ledger.HashSize]byte) (uint64, bool, error) {
	prefix := binary.BigEndian.Uint64(h[:8])
	// The first block whose first hash starts at or after prefix; h can
	// be no further than there, and, its prefix shared, may begin in the
	// block before.
	k, _ := slices.BinarySearch(r.fences, prefix)
	k = max(k-1, 0)
	b := make([]byte, leafBlockSize)
	for ; k < len(r.fences) && r.fences[k] <= prefix; k++ {
		if _, err := r.f.ReadAt(b, int64(k)*leafBlockSize); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("ledger: reading leaf-hash run %s: %w", r.name(), err)
		}
		recs, err := r.checkBlock(b, k)
		if err != nil {
			return 0, false, err
		}
		for ; len(recs) > 0; recs = recs[leafRecSize:] {
			switch c := bytes.Compare(recs[:ledger.HashSize], h[:]); {
			case c == 0:
				i := binary.BigEndian.Uint64(recs[ledger.HashSize:])
				if i < r.first || i >= r.end {
					return 0, false, fmt.Errorf("%w: leaf-hash run %s: block %d gives entry %d, outside the run", ledger.ErrCorrupt, r.name(), k, i)
				}
				return i, true, nil
			case c > 0:
				return 0, false, nil
			}
		}
	}
	return 0, false, nil
}

// lookup returns the lowest index under h: the runs, oldest first, then
// badger.
func (li *leafIndex) lookup(db *badgerdb.DB, h [ledger.HashSize]byte) (uint64, bool, error) {
	li.mu.RLock()
	defer li.mu.RUnlock()
	for _, r := range li.runs {
		if i, ok, err := r.find(h); err != nil || ok {
			return i, ok, err
		}
	}
	var index uint64
	var found bool
	err := db.View(func(txn *badgerdb.Txn) error {
		prefix := leafHashKey(h, 0)[:1+ledger.HashSize]
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		// Keys of a hash sort by index: the first is the lowest.
		if it.Seek(prefix); it.Valid() {
			key := it.Item().Key()
			if len(key) != len(prefix)+8 {
				return fmt.Errorf("%w: a leaf-hash key of %d bytes", ledger.ErrCorrupt, len(key))
			}
			index, found = binary.BigEndian.Uint64(key[len(prefix):]), true
		}
		return nil
	})
	return index, found, err
}

// close stops the merger, waiting for it, and closes the runs.
func (li *leafIndex) close() error {
	li.mu.Lock()
	li.stop = true
	li.mu.Unlock()
	li.merged.Wait()
	var errs []error
	for _, r := range li.runs {
		errs = append(errs, r.f.Close())
	}
	li.runs = nil
	return errors.Join(errs...)
}
