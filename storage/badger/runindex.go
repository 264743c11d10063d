package badger

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
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

// Two indexes keep all but their latest part in plain files, read with
// pread, and not in badger: the leaf-hash index (IndexOf) in the store's
// leaves/ directory, and the idempotency-key index (IndexOfKey) in keys/.
// What grows with the log in badger's memory-mapped tables stays resident
// in the process: a leaf hash is 32 random bytes per entry, and a key one
// more record for every entry that carries one (every MCP gateway call,
// most SDK appends), which made the largest parts of what grew with the
// log (docs/log.md §5). In runs, an index's resident cost is the fences
// read into memory, 8 bytes per block of 102 records.
//
// Each index (a runIndex, described by its runKind) is a list of runs,
// each the records of the entries [first, end) sorted by (hash, index),
// in a file named by that range (first-end.leaves, first-end.keys; 20
// decimal digits each), written whole, synced and renamed into place,
// and never changed; and, in memory, the window: the records of the
// entries after the last run, added as each frame is indexed and rebuilt
// at Open from the frame log (window.go). A record is a 32-byte
// hash and a u64 index: a leaf hash, or the SHA-256 of an idempotency
// key. Every entry has a leaf hash, so a leaf-hash run holds a record per
// entry (fewer only if hashes repeat: only the lowest index under a hash
// is kept, which IndexOf returns); not every entry has a key, so a key
// run holds the keys of those of its entries that have one, possibly
// none. Neither index forgets: idempotency keys are kept for the life of
// the log, at a resident cost of the fences alone.
//
// Once runSize entries follow an index's runs, the indexer writes the
// window as a run, then empties it. A background merger merges two
// neighbouring runs while the later one covers more than 1/ratio as many
// entries as the one before it (half for leaf hashes, a quarter for
// keys: runKind.ratio), so that sizes shrink by that ratio from the
// oldest run to the newest and a log of n entries has at most about
// log_ratio(n/runSize)+1 runs, each searched with one read, rarely two.
//
// A run file is blocks of runBlockSize bytes, then a footer:
//
//	block:  up to runPerBlock records of 40 bytes (32-byte hash, u64
//	        index), zeros up to byte 4088, u32 record count (1 or more),
//	        u32 CRC-32C of the 4,092 bytes before it
//	footer: u64 first hash bytes (big-endian prefix) of each block's first
//	        record, then u64 records, u64 blocks, u32 CRC-32C of the
//	        footer before it, and 4 bytes naming the index: "LEAF" or
//	        "KEYS"
//
// A key run with no record is a footer alone, of 0 records in 0 blocks.
// The footer's prefixes are read into memory at open (8 bytes per 102
// records). Integers are big-endian.
const (
	leavesDir    = "leaves"
	keysDir      = "keys"
	runBlockSize = 4096
	runRecSize   = ledger.HashSize + 8
	runPerBlock  = (runBlockSize - 8) / runRecSize
	runTrailer   = 8 + 8 + 4 + 4
)

// runKind is what tells one index kept in runs from the other.
type runKind struct {
	what   string // in messages: "leaf-hash", "idempotency-key"
	dir    string // under the store's directory
	suffix string // of its run files
	magic  string // the 4 bytes ending its run files
	prefix byte   // of its badger keys, before the window in memory
	mark   []byte // badger key of the runs' end (window.go)
	// sparse: a run may hold no record (entries without a key).
	sparse bool
	// rememberMisses: lookups remember what the runs do not hold
	// (runIndex.missed), for the commit's check that follows them.
	rememberMisses bool
	// sorted: badger's order of the kind's keys is the records' order
	// (a store from before the window in memory, moved at Open).
	sorted bool
	// ratio: each run covers at least ratio times the entries of the
	// next, which merges keep. A log of n entries has at most about
	// log_ratio(n/runSize)+1 runs, and a record is written again about
	// ratio/2 times per run it passes through: 2 for leaf hashes; 4 for
	// keys, which every commit looks up in every run, for half the runs
	// (5 at ten million entries, not 9) at a fifth more writes (11.5
	// writes of a record over its life there, not 9.4: a simulation of
	// the merges).
	ratio uint64
	// record returns the record of one of the kind's badger keys (a
	// store from before the window in memory).
	record func(item *badgerdb.Item) (runRecord, error)
}

var (
	leafRunKind = runKind{
		what: "leaf-hash", dir: leavesDir, suffix: ".leaves", magic: "LEAF",
		prefix: prefixLeafHash, mark: keyLeavesEnd, sorted: true, ratio: 2,
		record: func(item *badgerdb.Item) (runRecord, error) {
			key := item.Key()
			if len(key) != 1+ledger.HashSize+8 {
				return runRecord{}, fmt.Errorf("%w: a leaf-hash key of %d bytes", ledger.ErrCorrupt, len(key))
			}
			var rec runRecord
			copy(rec.hash[:], key[1:])
			rec.index = binary.BigEndian.Uint64(key[1+ledger.HashSize:])
			return rec, nil
		},
	}
	keyRunKind = runKind{
		what: "idempotency-key", dir: keysDir, suffix: ".keys", magic: "KEYS",
		prefix: prefixKey, mark: keyKeysEnd, sparse: true, rememberMisses: true, ratio: 4,
		record: func(item *badgerdb.Item) (runRecord, error) {
			rec := runRecord{hash: keyHash(item.Key()[1:])}
			err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("%w: the index's value of an idempotency key is %d bytes, not a uint64", ledger.ErrCorrupt, len(v))
				}
				rec.index = binary.BigEndian.Uint64(v)
				return nil
			})
			return rec, err
		},
	}
)

// keyHash is the hash under which the key runs hold an idempotency key:
// its SHA-256. SHA-256 is collision-resistant, so a record with a key's
// hash is taken to be that key's: finding two keys with one hash is not
// feasible, and the key runs do not hold the keys themselves.
func keyHash(key []byte) [ledger.HashSize]byte { return sha256.Sum256(key) }

// runSize is how many entries' records gather in the window before they
// are written as a run: about 1.5 MiB of memory for leaf hashes
// (window.go), and a run written about once a second at full speed. A
// variable for the tests.
var runSize uint64 = 1 << 14

// sortChunk is the most entries whose records a run of a kind that is
// not sorted in badger is sorted from at once, in memory (40 bytes a
// record): a store from before the key runs, or from before the window
// in memory, moves its keys from badger into runs of this many entries,
// which the merger then merges. A variable for the tests.
var sortChunk uint64 = 1 << 18

// mergesOff stops merges from starting; for the tests.
var mergesOff bool

type indexRun struct {
	first, end uint64 // entries [first, end)
	records    uint64
	f          *os.File
	fences     []uint64 // the first 8 bytes of each block's first hash
	kind       *runKind
}

func (r *indexRun) name() string { return runName(r.kind, r.first, r.end) }

func runName(k *runKind, first, end uint64) string {
	return fmt.Sprintf("%020d-%020d%s", first, end, k.suffix)
}

// runIndex is one of a store's indexes kept in runs.
type runIndex struct {
	kind   *runKind
	dir    string
	logger *slog.Logger

	// mu guards the fields below; lookups hold it for reading while
	// they read the runs and the window, so that the merger closes no
	// file under them and no run takes the window's records between.
	mu   sync.RWMutex
	runs []*indexRun // ordered, contiguous from entry 0
	err  error       // a failed background merge, reported by indexed

	merging bool
	merged  sync.WaitGroup
	stop    bool

	// missed remembers hashes a lookup found in no run, with the runs'
	// end then (kinds with rememberMisses). Runs gain records only when
	// their end moves (a merge rewrites the same records), so while it
	// has not, a hash in none of them is still in none: Commit's check of
	// an idempotency key the ledger looked up just before, to find a
	// replay, then reads no run for it, where a key no entry has costs a
	// block read per run. At most missedMax, all forgotten when full.
	missedMu sync.Mutex
	missed   map[[ledger.HashSize]byte]uint64

	// winMu guards the window (window.go): the records of the entries
	// from entry from, the runs' end, on, each hash with its lowest
	// index. Taken after mu by those that hold both.
	winMu  sync.RWMutex
	window map[[ledger.HashSize]byte]uint64
	from   uint64
}

// missedMax bounds runIndex.missed: more than the appends a ledger holds
// in flight, about 1.3 MB at most.
const missedMax = 1 << 14

// rememberMissed records that no run holds h while the runs end at end.
func (ri *runIndex) rememberMissed(h [ledger.HashSize]byte, end uint64) {
	ri.missedMu.Lock()
	defer ri.missedMu.Unlock()
	if ri.missed == nil || len(ri.missed) >= missedMax {
		ri.missed = make(map[[ledger.HashSize]byte]uint64)
	}
	ri.missed[h] = end
}

// takeMissed reports whether a lookup found h in none of the runs that
// end at end, the runs' end now (read with mu held), and forgets h.
func (ri *runIndex) takeMissed(h [ledger.HashSize]byte, end uint64) bool {
	ri.missedMu.Lock()
	defer ri.missedMu.Unlock()
	at, ok := ri.missed[h]
	if ok {
		delete(ri.missed, h)
	}
	return ok && at == end
}

// openRunIndex opens the runs of kind in dir, creating dir if need be;
// it removes unfinished and merged-over files.
func openRunIndex(kind *runKind, dir string, logger *slog.Logger) (*runIndex, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating the %s index directory: %w", kind.what, err)
	}
	ri := &runIndex{kind: kind, dir: dir, logger: logger, window: map[[ledger.HashSize]byte]uint64{}}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading the %s index directory: %w", kind.what, err)
	}
	type span struct{ first, end uint64 }
	var spans []span
	for _, d := range names {
		name := d.Name()
		if strings.HasSuffix(name, ".tmp") {
			// A run or merge a crash cut short.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("ledger: removing an unfinished %s run: %w", kind.what, err)
			}
			continue
		}
		first, end, ok := parseRunName(kind, name)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not a %s run", ledger.ErrCorrupt, filepath.Join(dir, name), kind.what)
		}
		spans = append(spans, span{first, end})
	}
	// Longest first among those starting together: a merge's output
	// covers its inputs, which a crash may have left behind.
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(b.end, a.end))
	})
	for _, sp := range spans {
		path := filepath.Join(dir, runName(kind, sp.first, sp.end))
		switch {
		case sp.first < ri.end() && sp.end <= ri.end():
			if err := os.Remove(path); err != nil {
				ri.close()
				return nil, fmt.Errorf("ledger: removing a merged %s run: %w", kind.what, err)
			}
			continue
		case sp.first != ri.end():
			err := fmt.Errorf("%w: the %s runs in %s cover the entries up to %d, then %s", ledger.ErrCorrupt, kind.what, dir, ri.end(), path)
			if sp.first > ri.end() {
				err = fmt.Errorf("%w: the run of entries [%d, %d) is missing", err, ri.end(), sp.first)
			}
			ri.close() // which forgets the runs, and their end
			return nil, err
		}
		r, err := openRun(kind, path, sp.first, sp.end)
		if err != nil {
			ri.close()
			return nil, err
		}
		ri.runs = append(ri.runs, r)
	}
	// Merges a close cut short.
	ri.mu.Lock()
	ri.startMerger()
	ri.mu.Unlock()
	return ri, nil
}

func parseRunName(kind *runKind, name string) (first, end uint64, ok bool) {
	a, b, ok := strings.Cut(strings.TrimSuffix(name, kind.suffix), "-")
	if !ok || !strings.HasSuffix(name, kind.suffix) || len(a) != 20 || len(b) != 20 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseUint(a, 10, 64)
	end, err2 := strconv.ParseUint(b, 10, 64)
	return first, end, err1 == nil && err2 == nil && first < end
}

// openRun opens a run file and reads its footer.
func openRun(kind *runKind, path string, first, end uint64) (*indexRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening a %s run: %w", kind.what, err)
	}
	r, err := readRunFooter(kind, f, first, end)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s run %s: %w", ledger.ErrCorrupt, kind.what, path, err)
	}
	return r, nil
}

func readRunFooter(kind *runKind, f *os.File, first, end uint64) (*indexRun, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	var t [runTrailer]byte
	if size < runTrailer {
		return nil, errors.New("shorter than its footer")
	}
	if _, err := f.ReadAt(t[:], size-runTrailer); err != nil {
		return nil, err
	}
	records, blocks := binary.BigEndian.Uint64(t[0:]), binary.BigEndian.Uint64(t[8:])
	// Fewer records than entries if leaf hashes repeat (only the lowest
	// index under a hash is kept), or if entries have no key.
	if string(t[20:]) != kind.magic || records > end-first || (records == 0 && !kind.sparse) || blocks != (records+runPerBlock-1)/runPerBlock ||
		uint64(size) != blocks*runBlockSize+blocks*8+runTrailer {
		return nil, fmt.Errorf("a footer of %d records in %d blocks for the %d entries [%d, %d) in a file of %d bytes", records, blocks, end-first, first, end, size)
	}
	footer := make([]byte, blocks*8+runTrailer)
	if _, err := f.ReadAt(footer, int64(blocks*runBlockSize)); err != nil {
		return nil, err
	}
	n := len(footer) - 4 - len(kind.magic)
	if crc32.Checksum(footer[:n], castagnoli) != binary.BigEndian.Uint32(footer[n:]) {
		return nil, errors.New("its footer fails its checksum")
	}
	r := &indexRun{first: first, end: end, records: records, f: f, fences: make([]uint64, blocks), kind: kind}
	for i := range r.fences {
		r.fences[i] = binary.BigEndian.Uint64(footer[8*i:])
	}
	return r, nil
}

// runRecord is a hash and its entry's index.
type runRecord struct {
	hash  [ledger.HashSize]byte
	index uint64
}

func compareRecords(a, b runRecord) int {
	return cmp.Or(bytes.Compare(a.hash[:], b.hash[:]), cmp.Compare(a.index, b.index))
}

// runWriter writes a run file: blocks, then the footer.
type runWriter struct {
	kind    *runKind
	w       *bufio.Writer
	block   []byte
	n       int // records in block
	fences  []uint64
	records uint64
	last    runRecord
}

func newRunWriter(kind *runKind, f *os.File) *runWriter {
	return &runWriter{kind: kind, w: bufio.NewWriterSize(f, 64<<10), block: make([]byte, runBlockSize)}
}

func (w *runWriter) add(r runRecord) error {
	if w.records > 0 && compareRecords(w.last, r) >= 0 {
		return fmt.Errorf("%w: %s records out of order (entry %d after %d)", ledger.ErrCorrupt, w.kind.what, r.index, w.last.index)
	}
	if w.n == 0 {
		w.fences = append(w.fences, binary.BigEndian.Uint64(r.hash[:8]))
	}
	copy(w.block[w.n*runRecSize:], r.hash[:])
	binary.BigEndian.PutUint64(w.block[w.n*runRecSize+ledger.HashSize:], r.index)
	w.n++
	w.records++
	w.last = r
	if w.n == runPerBlock {
		return w.flushBlock()
	}
	return nil
}

func (w *runWriter) flushBlock() error {
	clear(w.block[w.n*runRecSize : runBlockSize-8])
	binary.BigEndian.PutUint32(w.block[runBlockSize-8:], uint32(w.n))
	binary.BigEndian.PutUint32(w.block[runBlockSize-4:], crc32.Checksum(w.block[:runBlockSize-4], castagnoli))
	w.n = 0
	_, err := w.w.Write(w.block)
	return err
}

func (w *runWriter) finish() error {
	if w.n > 0 {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	footer := make([]byte, 0, 8*len(w.fences)+runTrailer)
	for _, p := range w.fences {
		footer = binary.BigEndian.AppendUint64(footer, p)
	}
	footer = binary.BigEndian.AppendUint64(footer, w.records)
	footer = binary.BigEndian.AppendUint64(footer, uint64(len(w.fences)))
	footer = binary.BigEndian.AppendUint32(footer, crc32.Checksum(footer, castagnoli))
	footer = append(footer, w.kind.magic...)
	if _, err := w.w.Write(footer); err != nil {
		return err
	}
	return w.w.Flush()
}

// createRun writes the run of entries [first, end) from the records each
// yields in order: to a .tmp file, synced, renamed into place, and the
// directory synced. It returns the run, open.
func (ri *runIndex) createRun(first, end uint64, each func(add func(runRecord) error) error) (*indexRun, error) {
	what := ri.kind.what
	path := filepath.Join(ri.dir, runName(ri.kind, first, end))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: writing a %s run: %w", what, err)
	}
	w := newRunWriter(ri.kind, f)
	err = each(w.add)
	if err == nil && w.records > end-first {
		err = fmt.Errorf("ledger: a %s run of %d records for the %d entries [%d, %d)", what, w.records, end-first, first, end)
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
		err = syncDir(ri.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("ledger: writing the %s run [%d, %d): %w", what, first, end, err)
	}
	return openRun(ri.kind, path, first, end)
}

// end is the entry after the runs. Called with mu held, or before the
// merger may run (it replaces runs in place).
func (ri *runIndex) end() uint64 {
	if len(ri.runs) == 0 {
		return 0
	}
	return ri.runs[len(ri.runs)-1].end
}

// runsEnd is end for callers that do not hold mu: once open, the index
// may be merging runs that a close cut short.
func (ri *runIndex) runsEnd() uint64 {
	ri.mu.RLock()
	defer ri.mu.RUnlock()
	return ri.end()
}

// eachBadgerKey calls fn with each of the kind's keys in badger and its
// record, in badger's order.
func (ri *runIndex) eachBadgerKey(db *badgerdb.DB, fn func(item *badgerdb.Item, rec runRecord) error) error {
	return db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{ri.kind.prefix}, PrefetchValues: !ri.kind.sorted})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rec, err := ri.kind.record(it.Item())
			if err != nil {
				return err
			}
			if err := fn(it.Item(), rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// badgerRecords yields, sorted, the records badger holds of the entries
// [first, end), the lowest index only under a hash that repeats, and
// gives seen every key of the kind it reads, in the same pass.
func (ri *runIndex) badgerRecords(db *badgerdb.DB, first, end uint64, add func(runRecord) error, seen func(*badgerdb.Item, runRecord)) error {
	var last runRecord
	n := 0
	once := func(rec runRecord) error {
		if n > 0 && rec.hash == last.hash {
			return nil // a repeated hash: the lowest index only
		}
		last = rec
		n++
		return add(rec)
	}
	var recs []runRecord // of a kind badger does not keep in order
	err := ri.eachBadgerKey(db, func(item *badgerdb.Item, rec runRecord) error {
		seen(item, rec)
		switch {
		case rec.index < first || rec.index >= end:
			// Left by a crash after a run was written, or of a frame
			// badger indexed in part, or of another chunk.
			return nil
		case !ri.kind.sorted:
			recs = append(recs, rec)
			return nil
		}
		return once(rec)
	})
	if err != nil {
		return err
	}
	slices.SortFunc(recs, compareRecords)
	for _, rec := range recs {
		if err := once(rec); err != nil {
			return err
		}
	}
	return nil
}

// mergeable returns the position of the first of two runs to merge, or -1:
// the oldest pair whose later run is more than 1/ratio the size of the
// earlier, so that merging keeps sizes shrinking by at least the kind's
// ratio. Called with mu held.
func (ri *runIndex) mergeable() int {
	for i := 0; i+1 < len(ri.runs); i++ {
		a, b := ri.runs[i], ri.runs[i+1]
		if ri.kind.ratio*(b.end-b.first) > a.end-a.first {
			return i
		}
	}
	return -1
}

// startMerger starts the merger if runs call for merging and it is not
// running. Called with mu held.
func (ri *runIndex) startMerger() {
	if !ri.merging && !ri.stop && !mergesOff && ri.mergeable() >= 0 {
		ri.merging = true
		ri.merged.Add(1)
		go ri.merge()
	}
}

// merge merges runs until none call for it, or the index is closing.
func (ri *runIndex) merge() {
	defer ri.merged.Done()
	for {
		ri.mu.Lock()
		i := -1
		if !ri.stop {
			i = ri.mergeable()
		}
		if i < 0 {
			ri.merging = false
			ri.mu.Unlock()
			return
		}
		a, b := ri.runs[i], ri.runs[i+1]
		ri.mu.Unlock()
		// The runs are never changed, and only this goroutine removes
		// them: they can be read without the lock.
		r, err := ri.createRun(a.first, b.end, func(add func(runRecord) error) error {
			return mergeRuns(a, b, add)
		})
		ri.mu.Lock()
		if err != nil {
			ri.err, ri.merging = err, false
			ri.mu.Unlock()
			ri.logger.Error("ledger: merging "+ri.kind.what+" runs failed", slog.Any("err", err))
			return
		}
		ri.runs = slices.Replace(ri.runs, i, i+2, r)
		ri.mu.Unlock()
		for _, old := range []*indexRun{a, b} {
			old.f.Close()
			if err := os.Remove(filepath.Join(ri.dir, old.name())); err != nil {
				// Open removes it: it is covered by the merged run.
				ri.logger.Warn("ledger: removing a merged "+ri.kind.what+" run", slog.Any("err", err))
			}
		}
	}
}

// mergeRuns yields the records of a and b in order.
func mergeRuns(a, b *indexRun, add func(runRecord) error) error {
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
		if okA && (!okB || compareRecords(x, y) < 0) {
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
	r     *indexRun
	buf   []byte // blocks read ahead
	block int    // next block to read
	recs  []byte // records left in the current block
}

func newRunReader(r *indexRun) *runReader { return &runReader{r: r} }

func (rr *runReader) next() (runRecord, bool, error) {
	for len(rr.recs) == 0 {
		if rr.block >= len(rr.r.fences) {
			return runRecord{}, false, nil
		}
		if len(rr.buf) == 0 {
			n := min(16, len(rr.r.fences)-rr.block)
			rr.buf = make([]byte, n*runBlockSize)
			if _, err := rr.r.f.ReadAt(rr.buf, int64(rr.block)*runBlockSize); err != nil {
				return runRecord{}, false, fmt.Errorf("ledger: reading %s run %s: %w", rr.r.kind.what, rr.r.name(), err)
			}
		}
		recs, err := rr.r.checkBlock(rr.buf[:runBlockSize], rr.block)
		if err != nil {
			return runRecord{}, false, err
		}
		rr.recs, rr.buf = recs, rr.buf[runBlockSize:]
		rr.block++
	}
	var rec runRecord
	copy(rec.hash[:], rr.recs)
	rec.index = binary.BigEndian.Uint64(rr.recs[ledger.HashSize:])
	rr.recs = rr.recs[runRecSize:]
	return rec, true, nil
}

// checkBlock checks block k's checksum and returns its records.
func (r *indexRun) checkBlock(b []byte, k int) ([]byte, error) {
	n := int(binary.BigEndian.Uint32(b[runBlockSize-8:]))
	if crc32.Checksum(b[:runBlockSize-4], castagnoli) != binary.BigEndian.Uint32(b[runBlockSize-4:]) || n == 0 || n > runPerBlock {
		return nil, fmt.Errorf("%w: %s run %s: block %d fails its checksum", ledger.ErrCorrupt, r.kind.what, r.name(), k)
	}
	return b[:n*runRecSize], nil
}

// find returns the lowest index under h in the run, reading its blocks
// into b, of runBlockSize bytes.
func (r *indexRun) find(h [ledger.HashSize]byte, b []byte) (uint64, bool, error) {
	prefix := binary.BigEndian.Uint64(h[:8])
	// The first block whose first hash starts at or after prefix; h can
	// be no further than there, and, its prefix shared, may begin in the
	// block before. A run with no record has no block.
	k, _ := slices.BinarySearch(r.fences, prefix)
	k = max(k-1, 0)
	for ; k < len(r.fences) && r.fences[k] <= prefix; k++ {
		// b may hold another run's block: a short read is an error.
		if n, err := r.f.ReadAt(b, int64(k)*runBlockSize); n < len(b) {
			if err == nil || errors.Is(err, io.EOF) {
				return 0, false, fmt.Errorf("%w: %s run %s: block %d is cut short (the file shrank since it was opened)", ledger.ErrCorrupt, r.kind.what, r.name(), k)
			}
			return 0, false, fmt.Errorf("ledger: reading %s run %s: %w", r.kind.what, r.name(), err)
		}
		recs, err := r.checkBlock(b, k)
		if err != nil {
			return 0, false, err
		}
		// The first record of h or after it, by binary search: records
		// are sorted by (hash, index), so it has the lowest index
		// under h.
		n := len(recs) / runRecSize
		lo, hi := 0, n
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if bytes.Compare(recs[m*runRecSize:m*runRecSize+ledger.HashSize], h[:]) < 0 {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo == n {
			continue // all before h: h may begin the next block
		}
		rec := recs[lo*runRecSize:]
		if !bytes.Equal(rec[:ledger.HashSize], h[:]) {
			return 0, false, nil
		}
		i := binary.BigEndian.Uint64(rec[ledger.HashSize:])
		if i < r.first || i >= r.end {
			return 0, false, fmt.Errorf("%w: %s run %s: block %d gives entry %d, outside the run", ledger.ErrCorrupt, r.kind.what, r.name(), k, i)
		}
		return i, true, nil
	}
	return 0, false, nil
}

// lookup returns the lowest index under h: the runs, oldest first,
// then the window.
func (ri *runIndex) lookup(h [ledger.HashSize]byte) (uint64, bool, error) {
	var index uint64
	var found bool
	err := ri.withRuns(func(inRuns func([ledger.HashSize]byte) (uint64, bool, error)) error {
		var err error
		if index, found, err = inRuns(h); err != nil || found {
			return err
		}
		if ri.kind.rememberMisses {
			ri.rememberMissed(h, ri.end())
		}
		index, found = ri.inWindow(h)
		return nil
	})
	return index, found, err
}

// withRuns calls fn with inRuns, which returns the lowest index under a
// hash in the runs, oldest first, holding mu for reading until fn
// returns: fn may read the window after the runs, for the entries after
// them, as no run is added, and so the window not drained, meanwhile.
func (ri *runIndex) withRuns(fn func(inRuns func([ledger.HashSize]byte) (uint64, bool, error)) error) error {
	b := blockPool.Get().(*[runBlockSize]byte)
	defer blockPool.Put(b)
	ri.mu.RLock()
	defer ri.mu.RUnlock()
	return fn(func(h [ledger.HashSize]byte) (uint64, bool, error) {
		for _, r := range ri.runs {
			if i, ok, err := r.find(h, b[:]); err != nil || ok {
				return i, ok, err
			}
		}
		return 0, false, nil
	})
}

// blockPool holds the blocks lookups read into: a commit looks up each of
// its keys, in every run, and a block each would be most of its garbage.
var blockPool = sync.Pool{New: func() any { return new([runBlockSize]byte) }}

// scan reads every block of the runs, checking its checksum, that the
// records are in order and of entries in the run, and that there are as
// many as the run's footer says, and returns the entry after the runs and
// how many records they hold. It reads the runs there when it starts,
// each through a file of its own, so that it holds up neither lookups nor
// the merger, which replaces runs with others of the same records.
func (ri *runIndex) scan() (end, records uint64, err error) {
	ri.mu.RLock()
	end = ri.end()
	var runs []indexRun
	for _, r := range ri.runs {
		c := *r
		if c.f, err = os.Open(filepath.Join(ri.dir, r.name())); err != nil {
			break
		}
		runs = append(runs, c)
	}
	ri.mu.RUnlock()
	defer func() {
		for _, r := range runs {
			r.f.Close()
		}
	}()
	if err != nil {
		return 0, 0, fmt.Errorf("ledger: reading the %s runs: %w", ri.kind.what, err)
	}
	for _, r := range runs {
		rr := newRunReader(&r)
		var last runRecord
		var n uint64
		for ; ; n++ {
			rec, ok, err := rr.next()
			if err != nil {
				return 0, 0, err
			}
			if !ok {
				break
			}
			if rec.index < r.first || rec.index >= r.end || (n > 0 && compareRecords(last, rec) >= 0) {
				return 0, 0, fmt.Errorf("%w: %s run %s: record %d, of entry %d, is out of order or outside the run", ledger.ErrCorrupt, ri.kind.what, r.name(), n, rec.index)
			}
			last = rec
		}
		if n != r.records {
			return 0, 0, fmt.Errorf("%w: %s run %s: its blocks hold %d records, its footer says %d", ledger.ErrCorrupt, ri.kind.what, r.name(), n, r.records)
		}
		records += n
	}
	return end, records, nil
}

// close stops the merger, waiting for it, and closes the runs.
func (ri *runIndex) close() error {
	ri.mu.Lock()
	ri.stop = true
	ri.mu.Unlock()
	ri.merged.Wait()
	var errs []error
	for _, r := range ri.runs {
		errs = append(errs, r.f.Close())
	}
	ri.runs = nil
	return errors.Join(errs...)
}
