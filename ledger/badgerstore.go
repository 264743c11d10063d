package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// BadgerStore is a Store in a badger database in one directory.
//
// Keys start with one byte naming their kind; integers in keys are
// big-endian and fixed-width, so badger's byte order is index order and
// entries can be read with one forward iterator. Integer values are
// big-endian uint64.
//
//	'e' u64 index               entry bytes
//	'h' [32]byte leaf hash      u64 index of the first entry with that leaf hash
//	't' u8 level, u64 index     tile hashes, the last version committed
//	'c' u64 size                signed checkpoint for that tree size
//	'k' idempotency key         u64 index of the entry committed with it
//	'm' "size"                  u64 tree size (number of entries)
//	'm' "checkpoint"            u64 tree size of the latest checkpoint
//
// The tree size is written in the transaction that writes the entries it
// counts. A badger Sequence would not do: it leases numbers ahead and
// leaves gaps after a crash, while a log's indices must be dense.
type BadgerStore struct {
	db *badger.DB

	stopGC    context.CancelFunc
	gcStopped chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*BadgerStore)(nil)

const (
	prefixEntry      = 'e'
	prefixLeafHash   = 'h'
	prefixKey        = 'k'
	prefixTile       = 't'
	prefixCheckpoint = 'c'
	prefixMeta       = 'm'
)

var (
	keySize             = []byte{prefixMeta, 's', 'i', 'z', 'e'}
	keyLatestCheckpoint = []byte{prefixMeta, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'}
)

func entryKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixEntry}, index)
}

func leafHashKey(h [HashSize]byte) []byte {
	return append([]byte{prefixLeafHash}, h[:]...)
}

func idempotencyKey(key []byte) []byte {
	return append([]byte{prefixKey}, key...)
}

func tileKey(level uint8, index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixTile, level}, index)
}

func checkpointKey(size uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCheckpoint}, size)
}

// BadgerOptions configures OpenBadger. The zero value is a profile for a
// small machine: a ledger process of 2 cores that should stay under
// 256 MiB of RSS with a few hundred thousand entries. Badger's own defaults
// assume a large server (64 MiB memtables, five of them, a 256 MiB block
// cache, 4 compactors).
//
// Measured with 220,000 entries of 600 bytes in group commits of 256, with
// entries in the LSM tree (before they moved to the value log), the
// memory went mostly to two things no option removes. Badger maps its
// table files into memory, so their pages (about the database's size on
// disk, 83 MB here) count in RSS until the kernel needs them back; the
// value-log files are mapped too, and with entries in them their clean,
// reclaimable pages now make most of the RSS of a long run. And
// each table it builds, on flush and compaction, takes a buffer of about
// twice the table's size, of which it keeps up to 8 for reuse: hence
// small memtables and tables below. The Go heap also grows to twice what
// is live unless the process sets a memory limit; with GOMEMLIMIT=128MiB
// the peak RSS of that run was about 240 MiB, without it about 450 MiB.
// OpenBadger warns when no limit is set.
type BadgerOptions struct {
	// MemTableSize is the size of one memtable, and of a table flushed to
	// level 0. Optional, default 4 MiB. Each memtable costs about 1.3
	// times this in heap plus its write-ahead file, and each flush
	// another buffer of twice this. It also bounds one Commit: badger
	// refuses a transaction larger than 15% of it, about 614 KiB by
	// default (some 900 entries of 600 bytes with their leaf hashes and
	// tiles); a larger batch fails whole, with nothing written.
	MemTableSize int64

	// NumMemtables is how many full memtables may wait to be flushed
	// before writes stall. Optional, default 2: writes come from one
	// goroutine in group commits, so a short queue is enough.
	NumMemtables int

	// BlockCacheSize is the size of the cache of decompressed table
	// blocks. Optional, default 8 MiB: reads are mostly of recent entries
	// and tiles, and a larger cache only grows the heap.
	BlockCacheSize int64

	// NumCompactors is how many goroutines compact the LSM tree.
	// Optional, default 2, which is one per core here and the least badger
	// accepts (other than 0, which stops compaction).
	NumCompactors int

	// ValueLogFileSize is the size of one value-log file, which holds
	// entries and tiles. Optional, default 16 MiB: value-log GC rewrites a
	// whole file at a time, and small files keep that work small.
	ValueLogFileSize int64

	// GCInterval is how often value-log garbage collection runs. Optional,
	// default 5 minutes; negative disables it.
	GCInterval time.Duration

	// GCDiscardRatio is the fraction of a value-log file that must be
	// garbage before GC rewrites it. Optional, default 0.5; otherwise it
	// must be above 0 and below 1.
	GCDiscardRatio float64

	// Logger receives badger's messages and the store's own. Optional,
	// default slog.Default(). Badger's Info and Debug messages (tables
	// opened, compactions) are logged at Debug, so the default is quiet.
	Logger *slog.Logger

	// Tune, if set, is called last with the badger options this store
	// would use and may change any of them, at the caller's risk.
	// Optional. SyncWrites makes no difference (every commit is synced
	// with DB.Sync); OpenBadger refuses InMemory rather than silently
	// undo it.
	Tune func(*badger.Options)
}

// Defaults of BadgerOptions, documented on its fields.
const (
	defaultMemTableSize     = 4 << 20
	defaultNumMemtables     = 2
	defaultBlockCacheSize   = 8 << 20
	defaultNumCompactors    = 2
	defaultValueLogFileSize = 16 << 20
	defaultGCInterval       = 5 * time.Minute
	defaultGCDiscardRatio   = 0.5

	// valueThreshold is the size from which badger puts a value in the
	// value log: entries and tiles are larger, index values smaller.
	valueThreshold = 64
)

// withDefaults returns o with every unset field set to its default, or an
// error naming the first field out of range.
func (o BadgerOptions) withDefaults() (BadgerOptions, error) {
	setDefault(&o.MemTableSize, defaultMemTableSize)
	setDefault(&o.NumMemtables, defaultNumMemtables)
	setDefault(&o.BlockCacheSize, defaultBlockCacheSize)
	setDefault(&o.NumCompactors, defaultNumCompactors)
	setDefault(&o.ValueLogFileSize, defaultValueLogFileSize)
	setDefault(&o.GCInterval, defaultGCInterval)
	setDefault(&o.GCDiscardRatio, defaultGCDiscardRatio)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.MemTableSize < 0:
		return o, fmt.Errorf("ledger: BadgerOptions.MemTableSize %d is negative", o.MemTableSize)
	case o.NumMemtables < 0:
		return o, fmt.Errorf("ledger: BadgerOptions.NumMemtables %d is negative", o.NumMemtables)
	case o.BlockCacheSize < 0:
		return o, fmt.Errorf("ledger: BadgerOptions.BlockCacheSize %d is negative", o.BlockCacheSize)
	case o.NumCompactors < 2:
		return o, fmt.Errorf("ledger: BadgerOptions.NumCompactors %d: badger needs at least 2", o.NumCompactors)
	case o.ValueLogFileSize < 1<<20 || o.ValueLogFileSize >= 2<<30:
		return o, fmt.Errorf("ledger: BadgerOptions.ValueLogFileSize %d is not in [1 MiB, 2 GiB)", o.ValueLogFileSize)
	case o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1:
		return o, fmt.Errorf("ledger: BadgerOptions.GCDiscardRatio %v is not in (0, 1)", o.GCDiscardRatio)
	}
	return o, nil
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// badgerOptions returns the badger options for a store in dir; o has its
// defaults set.
func (o BadgerOptions) badgerOptions(dir string) (badger.Options, error) {
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{o.Logger.With(slog.String("component", "badger"))}).
		// Durability is the Store's contract: every commit is synced
		// before it returns, by an explicit DB.Sync (see syncCommit), not
		// by SyncWrites: with SyncWrites badger only logs a failed sync of
		// the value log, while DB.Sync returns it.
		WithSyncWrites(false).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemtables).
		WithBlockCacheSize(o.BlockCacheSize).
		// The index cache serves only encrypted tables; unencrypted table
		// indexes are read in place from the memory-mapped files.
		WithIndexCacheSize(0).
		WithNumCompactors(o.NumCompactors).
		WithValueLogFileSize(o.ValueLogFileSize).
		// Entries and tiles go to the value log; the LSM tree keeps keys,
		// value pointers, the leaf-hash index and the sizes. Compaction
		// then rewrites pointers, not entries: measured over 150,000
		// appends, 11,290 appends/s instead of 6,381 with entries in the
		// tree (docs/performance.md). Rewritten tiles become value-log
		// garbage, which the value-log GC reclaims.
		WithValueThreshold(valueThreshold).
		// Small tables of one size at every level keep the buffers badger
		// builds them in, and keeps for reuse, small.
		WithBaseTableSize(512 << 10).
		// Entries are JSON with hex digests and base64 signatures: zstd
		// stores them in about 0.37 of their size, snappy in 0.52, and
		// the mapped tables' pages are most of the process's RSS.
		WithCompression(options.ZSTD).
		WithZSTDCompressionLevel(1)
	bo.TableSizeMultiplier = 1 // has no With method
	if o.Tune != nil {
		o.Tune(&bo)
	}
	switch {
	case bo.InMemory:
		return bo, errors.New("ledger: BadgerOptions.Tune turned InMemory on: a Store must be durable")
	case bo.Compression != options.None && bo.BlockCacheSize <= 0:
		// Badger panics on this one; an error is kinder.
		return bo, errors.New("ledger: badger needs a BlockCacheSize when compression is on")
	}
	return bo, nil
}

// warnNoMemoryLimit warns once a process, not once a store.
var warnNoMemoryLimit sync.Once

// OpenBadger opens, or creates, the badger store in dir. Value-log garbage
// collection runs in the background until ctx is done or the store is
// closed.
func OpenBadger(ctx context.Context, dir string, opts BadgerOptions) (*BadgerStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bo, err := opts.badgerOptions(dir)
	if err != nil {
		return nil, err
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening badger store in %s: %w", dir, err)
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	s := &BadgerStore{db: db, stopGC: stopGC, gcStopped: make(chan struct{})}
	go s.collectGarbage(gcCtx, opts.GCInterval, opts.GCDiscardRatio, opts.Logger)
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		warnNoMemoryLimit.Do(func() {
			opts.Logger.WarnContext(ctx, "ledger: no Go memory limit is set (GOMEMLIMIT); "+
				"badger's table buffers can grow the heap to several times what is live")
		})
	}
	opts.Logger.DebugContext(ctx, "ledger: badger store opened",
		slog.String("dir", dir),
		slog.Int64("memtable_size", bo.MemTableSize),
		slog.Int("num_memtables", bo.NumMemtables),
		slog.Int64("block_cache_size", bo.BlockCacheSize),
		slog.Int("num_compactors", bo.NumCompactors),
		slog.Int64("value_log_file_size", bo.ValueLogFileSize),
		slog.Duration("gc_interval", opts.GCInterval))
	return s, nil
}

// collectGarbage runs badger's value-log GC every interval until ctx is
// done, then closes s.gcStopped.
func (s *BadgerStore) collectGarbage(ctx context.Context, interval time.Duration, discardRatio float64, log *slog.Logger) {
	defer close(s.gcStopped)
	if interval < 0 {
		return
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		// Each successful run rewrites one file; run until there is
		// nothing left worth rewriting.
		rewrites := 0
		for ctx.Err() == nil {
			err := s.db.RunValueLogGC(discardRatio)
			if err == nil {
				rewrites++
				continue
			}
			// ErrNoRewrite: nothing to collect; ErrRejected: a GC is
			// already running. Both are routine.
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				log.WarnContext(ctx, "ledger: badger value-log GC failed", slog.Any("error", err))
			}
			break
		}
		log.DebugContext(ctx, "ledger: badger value-log GC", slog.Int("rewrites", rewrites))
	}
}

// Close stops garbage collection and closes the database. Calling it again
// returns the first call's result.
func (s *BadgerStore) Close() error {
	s.closeOnce.Do(func() {
		s.stopGC()
		// Badger must not be closed under a running GC.
		<-s.gcStopped
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("ledger: closing badger store: %w", err)
		}
	})
	return s.closeErr
}

// State implements Store.
func (s *BadgerStore) State(ctx context.Context) (State, error) {
	var st State
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		if st.Size, _, err = getUint64(txn, keySize); err != nil {
			return err
		}
		size, ok, err := getUint64(txn, keyLatestCheckpoint)
		if err != nil || !ok {
			return err
		}
		st.CheckpointSize = size
		st.Checkpoint, err = getValue(txn, checkpointKey(size))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("ledger: latest checkpoint for size %d is missing from the store", size)
		}
		return err
	})
	if err != nil {
		return State{}, fmt.Errorf("ledger: reading state: %w", err)
	}
	return st, nil
}

// Commit implements Store, in one badger transaction.
func (s *BadgerStore) Commit(ctx context.Context, b Batch) error {
	if err := checkBatchShape(b); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: batch at %d: %w", b.Start, err)
	}
	err := s.update(func(txn *badger.Txn) error {
		size, _, err := getUint64(txn, keySize)
		if err != nil {
			return err
		}
		if size != b.Start {
			return fmt.Errorf("ledger: batch at %d: stored size is %d: %w", b.Start, size, ErrConflict)
		}
		for i, e := range b.Entries {
			index := b.Start + uint64(i)
			if err := txn.Set(entryKey(index), e); err != nil {
				return err
			}
			// Keep the lower index of a repeated leaf hash; Get also sees
			// this transaction's own writes.
			hk := leafHashKey(b.LeafHashes[i])
			switch _, err := txn.Get(hk); {
			case errors.Is(err, badger.ErrKeyNotFound):
				if err := txn.Set(hk, binary.BigEndian.AppendUint64(nil, index)); err != nil {
					return err
				}
			case err != nil:
				return err
			}
		}
		for i, k := range b.Keys {
			if len(k) == 0 {
				continue
			}
			switch _, err := txn.Get(idempotencyKey(k)); {
			case err == nil:
				return fmt.Errorf("ledger: batch at %d: an idempotency key is already stored: %w", b.Start, ErrConflict)
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
			if err := txn.Set(idempotencyKey(k), binary.BigEndian.AppendUint64(nil, b.Start+uint64(i))); err != nil {
				return err
			}
		}
		for _, t := range b.Tiles {
			if err := txn.Set(tileKey(t.Level, t.Index), t.Hashes); err != nil {
				return err
			}
		}
		return txn.Set(keySize, binary.BigEndian.AppendUint64(nil, b.Start+uint64(len(b.Entries))))
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict):
		return err
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("ledger: batch at %d of %d entries and %d tiles is too large for one badger transaction "+
			"(commit smaller batches or raise BadgerOptions.MemTableSize); nothing was written: %w",
			b.Start, len(b.Entries), len(b.Tiles), err)
	case errors.Is(err, badger.ErrConflict):
		// Another writer committed in between: the ledger broke the
		// single-writer rule, and this batch no longer continues the log.
		return fmt.Errorf("ledger: batch at %d: concurrent write: %w: %w", b.Start, ErrConflict, err)
	default:
		return fmt.Errorf("ledger: committing batch at %d: %w", b.Start, err)
	}
}

// Entry implements Store.
func (s *BadgerStore) Entry(ctx context.Context, index uint64) ([]byte, error) {
	return s.getOne(entryKey(index), fmt.Sprintf("entry %d", index))
}

// getOne reads one value in a read transaction of its own; what names it
// in errors.
func (s *BadgerStore) getOne(key []byte, what string) ([]byte, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		v, err = getValue(txn, key)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, fmt.Errorf("ledger: %s: %w", what, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("ledger: reading %s: %w", what, err)
	}
	return v, nil
}

// ReadEntries implements Store with one iterator in one read transaction,
// so the size checked and the entries read are from the same snapshot.
func (s *BadgerStore) ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		size, _, err := getUint64(txn, keySize)
		if err != nil {
			return fmt.Errorf("ledger: reading entries: %w", err)
		}
		if start > end || end > size {
			return fmt.Errorf("ledger: entries [%d, %d) of %d: %w", start, end, size, ErrNotFound)
		}
		if start == end {
			return nil
		}
		// Values are read one at a time as fn asks for them; prefetching
		// would hold many in memory for no gain.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixEntry}})
		defer it.Close()
		var buf []byte // fn must not retain it, so one buffer serves every entry
		index := start
		for it.Seek(entryKey(start)); index < end; it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !it.Valid() || !isEntryKey(it.Item().Key(), index) {
				return fmt.Errorf("ledger: entry %d is missing below tree size %d", index, size)
			}
			if buf, err = it.Item().ValueCopy(buf[:0]); err != nil {
				return fmt.Errorf("ledger: reading entry %d: %w", index, err)
			}
			if err := fn(index, buf); err != nil {
				return err
			}
			index++
		}
		return nil
	})
}

func isEntryKey(key []byte, index uint64) bool {
	return len(key) == 9 && key[0] == prefixEntry && binary.BigEndian.Uint64(key[1:]) == index
}

// IndexOf implements Store.
func (s *BadgerStore) IndexOf(ctx context.Context, leafHash [HashSize]byte) (uint64, error) {
	var index uint64
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		index, found, err = getUint64(txn, leafHashKey(leafHash))
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: looking up leaf hash %x: %w", leafHash, err)
	case !found:
		return 0, fmt.Errorf("ledger: leaf hash %x: %w", leafHash, ErrNotFound)
	}
	return index, nil
}

// IndexOfKey implements Store.
func (s *BadgerStore) IndexOfKey(ctx context.Context, key []byte) (uint64, error) {
	var index uint64
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		index, found, err = getUint64(txn, idempotencyKey(key))
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: looking up an idempotency key: %w", err)
	case !found || len(key) == 0:
		return 0, fmt.Errorf("ledger: idempotency key: %w", ErrNotFound)
	}
	return index, nil
}

// Tile implements Store.
func (s *BadgerStore) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	var t []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		t, err = getValue(txn, tileKey(level, index))
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, fmt.Errorf("ledger: tile %d/%d: %w", level, index, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("ledger: reading tile %d/%d: %w", level, index, err)
	}
	return t, nil
}

// AddCheckpoint implements Store, in one badger transaction.
// update runs fn in a read-write transaction and, once it is committed,
// makes it durable with syncCommit.
func (s *BadgerStore) update(fn func(txn *badger.Txn) error) error {
	if err := s.db.Update(fn); err != nil {
		return err
	}
	return s.syncCommit()
}

// syncCommit makes the transaction just committed durable: it syncs the
// memtable's write-ahead file and the value log, and returns either
// failure. The ledger writes from one goroutine at a time, so the sync
// covers exactly the last commit and those before it. After a failed sync
// the store cannot say whether the commit is durable; the caller stops
// (ledger.ErrClosed) and a reopen reads what is on disk.
func (s *BadgerStore) syncCommit() error {
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("ledger: syncing the commit: %w", err)
	}
	return nil
}

func (s *BadgerStore) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	if len(signed) == 0 {
		return errEmptyCheckpoint
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: checkpoint for size %d: %w", size, err)
	}
	err := s.update(func(txn *badger.Txn) error {
		latest, ok, err := getUint64(txn, keyLatestCheckpoint)
		if err != nil {
			return err
		}
		if ok && size <= latest {
			return fmt.Errorf("ledger: checkpoint for size %d: latest is for size %d: %w", size, latest, ErrConflict)
		}
		treeSize, _, err := getUint64(txn, keySize)
		if err != nil {
			return err
		}
		if size > treeSize {
			return fmt.Errorf("ledger: checkpoint for size %d: tree size is %d: %w", size, treeSize, ErrConflict)
		}
		if err := txn.Set(checkpointKey(size), signed); err != nil {
			return err
		}
		return txn.Set(keyLatestCheckpoint, binary.BigEndian.AppendUint64(nil, size))
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict):
		return err
	case errors.Is(err, badger.ErrConflict):
		return fmt.Errorf("ledger: checkpoint for size %d: concurrent write: %w: %w", size, ErrConflict, err)
	default:
		return fmt.Errorf("ledger: adding checkpoint for size %d: %w", size, err)
	}
}

// Checkpoint implements Store.
func (s *BadgerStore) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	return s.getOne(checkpointKey(size), fmt.Sprintf("checkpoint for size %d", size))
}

// getValue returns a copy of the value at key, which stays valid after txn
// ends, or badger.ErrKeyNotFound.
func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// getUint64 returns the integer at key and whether it is stored.
func getUint64(txn *badger.Txn, key []byte) (uint64, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("ledger: value of key %q is %d bytes, not a uint64", key, len(v))
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	return n, err == nil, err
}

// badgerLogger adapts slog to badger.Logger. Badger reports routine work at
// Info, which is logged at Debug so that a default logger stays quiet.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(format string, args ...any) { l.logf(slog.LevelError, format, args) }
func (l badgerLogger) Warningf(format string, args ...any) {
	l.logf(slog.LevelWarn, format, args)
}
func (l badgerLogger) Infof(format string, args ...any)  { l.logf(slog.LevelDebug, format, args) }
func (l badgerLogger) Debugf(format string, args ...any) { l.logf(slog.LevelDebug, format, args) }

func (l badgerLogger) logf(level slog.Level, format string, args []any) {
	ctx := context.Background()
	// Badger logs often; skip formatting what nobody will see.
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
