package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/decisionledger/ledger/ledger"
)

// Store is a ledger.Store in one directory: a frame log (framelog.go) in
// frames/ that makes each batch durable with one write and one fdatasync,
// a badger database in index/ that indexes the frames, the checkpoint
// history in checkpoints/ (cphistory.go) with every signed checkpoint, and
// the checkpoint file (cpfile.go) with the latest. The directory is
// flock'ed while the store is open (docs/log.md §5).
//
// Badger keys start with one byte naming their kind; integers in keys are
// big-endian and fixed-width, so badger's byte order is index order and
// entries can be located with one forward iterator. Integer values are
// big-endian uint64.
//
//	't' u8 level, u64 index     a partial tile's hashes, the last version
//	                            committed (full tiles are in tiles/,
//	                            tilefile.go; a tile's last partial version
//	                            stays until the tiles mark after it is
//	                            full, see writeTiles)
//	'm' "size"                  u64 tree size (number of entries indexed)
//	'm' "end"                   u64 log position after the last frame indexed
//	'm' "tiles"                 u64 log position up to which the store
//	                            holds every frame's tiles, partial ones
//	                            here and full ones in synced tile files
//	                            (absent: 0)
//	'm' "tilefiles"             u64 size of each tile file (levels 0 to 7)
//	                            when the tiles mark was last written
//	'm' "leaves"                u64 entry up to which leaf-hash runs were
//	                            written, u64 log position of the frame
//	                            holding that entry, from which Open
//	                            rebuilds the window of the entries after
//	                            the runs (absent: 0, 0; window.go)
//	'm' "locations"             u64 log position up to which the locations
//	                            file holds every frame's entry locations,
//	                            u64 records it held when synced for this
//	                            mark (absent: 0, 0; locfile.go)
//	'm' "keys"                  u64 entry up to which idempotency-key runs
//	                            were written, u64 log position of the
//	                            frame holding it (absent: 0, 0; window.go)
//
// Where each entry is in the frame log is in the locations file
// (locfile.go), not in badger; stores written before it kept it in 'f'
// keys, which Open moves there. The leaf hashes and idempotency keys of
// the entries after their runs are in memory (window.go); stores written
// before that kept them in 'h' keys ([32]byte leaf hash, u64 index →
// empty) and 'k' keys (idempotency key → u64 index), with 8-byte run
// marks, which Open moves to runs.
//
// A store written before the checkpoint history kept its checkpoints here,
// 'c' u64 size → signed checkpoint and 'm' "checkpoint" → u64 size of the
// latest; open moves them to checkpoints/ and deletes the keys.
//
// Commit writes the frame and syncs it, then returns: the frame is the
// durable copy. An indexer goroutine indexes it in badger afterwards,
// without a sync, and until then reads find the frame's entries, keys,
// leaf hashes and tiles in an overlay (overlay.go); a batch becomes visible
// all at once when its frame is added there. The tree size and the log
// position are written in the last transaction that indexes a frame. Badger's own log replays as a prefix of its
// transactions after a crash; AddCheckpoint syncs badger, and
// Open re-indexes every frame after the last one badger kept. (A
// badger Sequence would not do for the size: it leases numbers ahead and
// leaves gaps after a crash, while a log's indices must be dense.)
type Store struct {
	dir     string
	lock    *os.File // holds the directory's flock until Close
	db      *badgerdb.DB
	log     *frameLog
	tiles   *tileFiles // the full tiles (tilefile.go)
	leaves  *runIndex  // the leaf-hash index (runindex.go)
	cps     *cpHistory // every signed checkpoint (cphistory.go)
	keys    *runIndex  // the idempotency-key index (runindex.go)
	reserve uint64     // Options.ReserveBytes
	floor   uint64     // indexFloor(reserve): less free, nothing is written to badger
	logger  *slog.Logger

	// locations holds where each entry is (locfile.go).
	locations *locationFile

	// ov holds the durable frames the indexer has not yet written to
	// badger (overlay.go); indexerDone is closed when the indexer stops,
	// stopping when Close starts (it wakes an indexer waiting for space).
	ov          *overlay
	indexerDone chan struct{}
	stopping    chan struct{}

	// writeMu serializes the writes of Commit and AddCheckpoint, and
	// guards the fields below.
	writeMu sync.Mutex
	broken  error // a write whose outcome is unknown: refuse further writes
	buf     []byte
	locs    []entryLocation

	// latestCP is the tree size of the latest signed checkpoint, if
	// hasCP; only AddCheckpoint, one call at a time, changes them.
	latestCP uint64
	hasCP    bool

	// repairs are what Open repaired (Repairs).
	repairs []string

	// filled are the tiles written full to the tile files since the tiles
	// mark was last written, whose partial version badger keeps until
	// the next mark (writeTiles); only recover, then the indexer, use it.
	filled map[tileID]bool

	closeOnce sync.Once
	closeErr  error
}

var _ ledger.Store = (*Store)(nil)

const (
	prefixLeafHash   = 'h'
	prefixKey        = 'k'
	prefixTile       = 't'
	prefixCheckpoint = 'c' // before the checkpoint history only
	prefixMeta       = 'm'
)

var (
	keySize             = []byte{prefixMeta, 's', 'i', 'z', 'e'}
	keyLogEnd           = []byte{prefixMeta, 'e', 'n', 'd'}
	keyTilesEnd         = []byte{prefixMeta, 't', 'i', 'l', 'e', 's'}
	keyLeavesEnd        = []byte{prefixMeta, 'l', 'e', 'a', 'v', 'e', 's'}
	keyKeysEnd          = []byte{prefixMeta, 'k', 'e', 'y', 's'}
	keyTileFiles        = []byte{prefixMeta, 't', 'i', 'l', 'e', 'f', 'i', 'l', 'e', 's'}
	keyLatestCheckpoint = []byte{prefixMeta, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'} // before the checkpoint history only
)

func tileKey(level uint8, index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixTile, level}, index)
}

// Options configures Open. The zero value is a profile for a
// small machine: a ledger process of 2 cores that stays under 96 MiB of
// RSS with MemoryLimit (docs/performance.md, "Memory"). Badger's own defaults assume a large server (64 MiB
// memtables, five of them, a 256 MiB block cache, 4 compactors).
//
// Entries live in the frame log, which is read and written with plain
// file I/O, so their pages are the kernel's page cache, not the process's
// memory, and so are the files that index them (locations, full tiles,
// leaf-hash and idempotency-key runs, the checkpoint history). The leaf
// hashes and keys of the latest entries (at most a run's worth and a
// frame's) are in the process's memory, about 1.5 MiB for each index at
// most (window.go). Badger holds what does not grow with the log: the
// partial tiles and the marks; it maps its table files into memory, so their pages
// count in RSS until the kernel needs them back. Each table it builds, on flush
// and compaction, takes a buffer of about twice the table's size, of
// which it keeps up to 8 for reuse: hence small memtables and tables. The
// Go heap also grows to twice what is live unless the process sets a
// memory limit: MemoryLimit goes with this profile (SetMemoryLimit), and
// Open warns when no limit is set.
type Options struct {
	// MemTableSize is the size of one memtable, and of a table flushed to
	// level 0. Optional, default 2 MiB. Each memtable costs about 1.3
	// times this in heap plus its write-ahead file, and each flush
	// another buffer of twice this. A batch whose index does not fit in
	// one badger transaction (15% of this) is indexed in several, and
	// still becomes visible at once.
	MemTableSize int64

	// NumMemtables is how many full memtables may wait to be flushed
	// before writes stall. Optional, default 2: writes come from one
	// goroutine in group commits, so a short queue is enough.
	NumMemtables int

	// BlockCacheSize is the size of badger's block cache. Optional,
	// default 8 MiB.
	BlockCacheSize int64

	// NumCompactors is how many goroutines compact the LSM tree.
	// Optional, default 2, which is one per core here and the least badger
	// accepts (other than 0, which stops compaction).
	NumCompactors int

	// SegmentSize is the largest size from which the frame log starts a
	// new segment file. Optional, default 64 MiB; at least 1 MiB. A new
	// log's segments start at 1 MiB and grow with it, each about as large
	// as the log before it, up to SegmentSize; a batch larger than a
	// segment gets a segment of its own. Each new segment is first
	// written as zero bytes of its size, in the background: a new store's
	// frame log takes 2 MiB of disk, the first segment and its spare.
	SegmentSize int64

	// ReserveBytes is the free space the store leaves on its file system.
	// Commit refuses a batch, writing nothing, while less than this is
	// free, and the spare segment is written only while this and the
	// spare's size are free. Optional, default 128 MiB. It is a threshold
	// of free space, not space the store takes. It keeps room for the
	// index: badger writes through memory-mapped files, and a write into a
	// mapping on a full disk kills the process (SIGBUS) instead of
	// returning an error. It also keeps the spare from taking the space
	// the segment in use grows into. Other writers on the same file system
	// can still fill it: below half of it (at most 64 MiB) free, the store
	// writes nothing more to badger (see Store.Close). Give the store a
	// file system of its own, or watch its free space.
	ReserveBytes int64

	// Logger receives badger's messages and the store's own. Optional,
	// default slog.Default(). Badger's Info and Debug messages (tables
	// opened, compactions) are logged at Debug, so the default is quiet.
	Logger *slog.Logger

	// Tune, if set, is called last with the badger options this store
	// would use and may change any of them, at the caller's risk.
	// Optional. Open refuses InMemory: the index must outlive the
	// process, since its marks say how far the files beside it are
	// complete.
	Tune func(*badgerdb.Options)
}

// Defaults of Options, documented on its fields.
const (
	defaultMemTableSize   = 2 << 20
	defaultNumMemtables   = 2
	defaultBlockCacheSize = 8 << 20
	defaultNumCompactors  = 2
	defaultSegmentSize    = 64 << 20
	defaultReserveBytes   = 128 << 20

	// valueThreshold keeps every value in the LSM tree: the largest is a
	// full tile of 8 KiB, and badger's value log would be one more file
	// to map and sync. Badger requires it below 15% of MemTableSize.
	valueThreshold = 16 << 10
)

// withDefaults returns o with every unset field set to its default, or an
// error naming the first field out of range.
func (o Options) withDefaults() (Options, error) {
	setDefault(&o.MemTableSize, defaultMemTableSize)
	setDefault(&o.NumMemtables, defaultNumMemtables)
	setDefault(&o.BlockCacheSize, defaultBlockCacheSize)
	setDefault(&o.NumCompactors, defaultNumCompactors)
	setDefault(&o.SegmentSize, defaultSegmentSize)
	setDefault(&o.ReserveBytes, defaultReserveBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.MemTableSize < 0:
		return o, fmt.Errorf("ledger: badger.Options.MemTableSize %d is negative", o.MemTableSize)
	case o.NumMemtables < 0:
		return o, fmt.Errorf("ledger: badger.Options.NumMemtables %d is negative", o.NumMemtables)
	case o.BlockCacheSize < 0:
		return o, fmt.Errorf("ledger: badger.Options.BlockCacheSize %d is negative", o.BlockCacheSize)
	case o.NumCompactors < 2:
		return o, fmt.Errorf("ledger: badger.Options.NumCompactors %d: badger needs at least 2", o.NumCompactors)
	case o.SegmentSize < minSegment:
		return o, fmt.Errorf("ledger: badger.Options.SegmentSize %d is below 1 MiB", o.SegmentSize)
	case o.ReserveBytes < 0:
		return o, fmt.Errorf("ledger: badger.Options.ReserveBytes %d is negative", o.ReserveBytes)
	}
	return o, nil
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// badgerOptions returns the badger options for the index in dir; o has
// its defaults set.
func (o Options) badgerOptions(dir string) (badgerdb.Options, error) {
	bo := badgerdb.DefaultOptions(dir).
		WithLogger(badgerLogger{o.Logger.With(slog.String("component", "badger"))}).
		// The frame log makes commits durable; AddCheckpoint syncs badger
		// with DB.Sync, which, unlike SyncWrites, returns a failed sync.
		WithSyncWrites(false).
		// The store is badger's only writer, one transaction at a time.
		WithDetectConflicts(false).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemtables).
		WithBlockCacheSize(o.BlockCacheSize).
		// The index cache serves only encrypted tables; unencrypted table
		// indexes are read in place from the memory-mapped files.
		WithIndexCacheSize(0).
		WithNumCompactors(o.NumCompactors).
		WithValueThreshold(valueThreshold).
		// Nothing is written to the value log, so its file stays small.
		WithValueLogFileSize(1 << 20).
		// Small tables of one size at every level keep the buffers badger
		// builds them in, and keeps for reuse, small.
		WithBaseTableSize(512 << 10).
		// The index is hashes, positions and checksums: it does not
		// compress.
		WithCompression(options.None).
		// A flipped bit in a table is found when its block is read, not
		// served as an entry's location or a tile; Verify checks every
		// table.
		WithChecksumVerificationMode(options.OnBlockRead)
	bo.TableSizeMultiplier = 1 // has no With method
	if o.Tune != nil {
		o.Tune(&bo)
	}
	switch {
	case bo.InMemory:
		return bo, errors.New("ledger: badger.Options.Tune turned InMemory on: a Store must be durable")
	case bo.Compression != options.None && bo.BlockCacheSize <= 0:
		// Badger panics on this one; an error is kinder.
		return bo, errors.New("ledger: badger needs a BlockCacheSize when compression is on")
	}
	return bo, nil
}

// warnNoMemoryLimit warns once a process, not once a store.
var warnNoMemoryLimit sync.Once

// Subdirectories of a Store's directory.
const (
	framesDir = "frames"
	indexDir  = "index"
)

// errEmptyCheckpoint refuses an empty signed checkpoint: State reports "no
// checkpoint" as nil, so an empty one could not be told apart from none.
var errEmptyCheckpoint = errors.New("ledger: empty signed checkpoint")

// errStoreLocked: another Store, in this process or another, has the
// directory open.
var errStoreLocked = errors.New("ledger: the store is open in another process (or twice in this one); its directory is locked")

// Open opens, or creates, the store in dir.
//
// It first locks dir (flock, exclusive): a store open twice would have two
// writers of one frame log, so while another process holds the lock
// Open refuses, having opened, created, renamed and removed nothing
// in dir. The lock lasts until Close, or until the process ends.
//
// It then indexes the frames that badger lost in a crash (those after the
// last one its durable state records), and erases a frame whose write a
// crash cut short, which was never acknowledged. It refuses, changing
// nothing, a frame log that does not continue the index, that is damaged
// (a frame that is not whole and is not such a torn write: see
// frameLog.endAt), or that holds fewer entries than the latest signed
// checkpoint, which the checkpoint file beside the frames keeps (cpfile.go)
// even when the index is lost.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bo, err := opts.badgerOptions(filepath.Join(dir, indexDir))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil {
		return nil, fmt.Errorf("ledger: %s holds a badger database at its top: a store of the layout before the frame log, "+
			"which this version does not read (it keeps frames/ and index/ in that directory)", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating store directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, lock: lock, reserve: uint64(opts.ReserveBytes), floor: indexFloor(uint64(opts.ReserveBytes)),
		logger: opts.Logger, indexerDone: make(chan struct{}), stopping: make(chan struct{}), filled: map[tileID]bool{}}
	fail := func(err error) (*Store, error) {
		if s.db != nil {
			s.db.Close()
		}
		if s.log != nil {
			s.log.close()
		}
		if s.tiles != nil {
			s.tiles.close()
		}
		if s.leaves != nil {
			s.leaves.close()
		}
		if s.cps != nil {
			s.cps.close()
		}
		if s.locations != nil {
			s.locations.close()
		}
		if s.keys != nil {
			s.keys.close()
		}
		lock.Close()
		return nil, err
	}
	if err := ownerOnly(dir); err != nil {
		return fail(err)
	}
	// A checkpoint file written but not renamed is of no use.
	if err := os.Remove(filepath.Join(dir, checkpointTmpFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("ledger: removing an unfinished checkpoint file: %w", err))
	}
	if s.log, err = openFrameLog(filepath.Join(dir, framesDir), opts.SegmentSize, func(size int64) bool {
		return s.freeAbove(uint64(size))
	}); err != nil {
		return fail(err)
	}
	// Badger's open flushes the memtables a crash left, and recovery
	// writes the index of the frames badger lost: neither may meet a
	// full disk.
	if err := s.roomForIndex("opening the store"); err != nil {
		return fail(fmt.Errorf("%w; free some space on it and start again", err))
	}
	if s.db, err = badgerdb.Open(bo); err != nil {
		return fail(fmt.Errorf("ledger: opening badger index in %s: %w", dir, err))
	}
	if err := ownerOnly(filepath.Join(dir, indexDir)); err != nil {
		return fail(err)
	}
	if s.tiles, err = openTileFiles(filepath.Join(dir, tilesDir)); err != nil {
		return fail(err)
	}
	if err := s.checkTileFiles(); err != nil {
		return fail(err)
	}
	if err := s.migrateTiles(ctx, opts.Logger); err != nil {
		return fail(err)
	}
	if s.leaves, err = openRunIndex(&leafRunKind, filepath.Join(dir, leavesDir), opts.Logger); err != nil {
		return fail(err)
	}
	if s.keys, err = openRunIndex(&keyRunKind, filepath.Join(dir, keysDir), opts.Logger); err != nil {
		return fail(err)
	}
	windowFrom := int64(math.MaxInt64)
	for _, ri := range []*runIndex{s.leaves, s.keys} {
		from, err := s.openWindow(ctx, ri, opts.Logger)
		if err != nil {
			return fail(err)
		}
		windowFrom = min(windowFrom, from)
	}
	if err := s.openCheckpoints(ctx, opts.Logger); err != nil {
		return fail(err)
	}
	if err := s.openLocations(ctx, opts.Logger); err != nil {
		return fail(err)
	}
	size, err := s.recover(ctx, opts.Logger, &windowRebuild{from: windowFrom})
	if err != nil {
		return fail(err)
	}
	s.log.prepareSpare()
	s.ov = newOverlay(size)
	go s.runIndexer()
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		warnNoMemoryLimit.Do(func() {
			opts.Logger.WarnContext(ctx, "ledger: no Go memory limit is set (GOMEMLIMIT); "+
				"badger's table buffers can grow the heap to several times what is live")
		})
	}
	opts.Logger.DebugContext(ctx, "ledger: badger store opened",
		slog.String("dir", dir),
		slog.Uint64("size", size),
		slog.Int64("memtable_size", bo.MemTableSize),
		slog.Int("num_memtables", bo.NumMemtables),
		slog.Int64("block_cache_size", bo.BlockCacheSize),
		slog.Int("num_compactors", bo.NumCompactors),
		slog.Int64("segment_size", opts.SegmentSize),
		slog.Int64("reserve_bytes", opts.ReserveBytes))
	return s, nil
}

// ownerOnly makes dir and everything in it readable and writable by its
// owner only: badger creates its files with mode 0666 less the umask, and
// offers no option.
//
// Badger may remove files while this walks the index: when a store is
// reopened after a crash, badgerdb.Open hands the memtables it replayed from
// their .mem files to a background flush, which writes them to a table
// and deletes the .mem files. A file that is gone has no mode to fix, so
// one that vanishes between the listing and its lstat or chmod is passed
// over; dir itself must exist. (Files badger creates after the walk are
// the umask's to restrict, as for any file badger creates later.)
func ownerOnly(dir string) error {
	gone := func(path string, err error) bool { return path != dir && errors.Is(err, fs.ErrNotExist) }
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if gone(path, err) {
			return nil
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if gone(path, err) {
			return nil
		}
		if err != nil {
			return err
		}
		want := info.Mode().Perm() &^ 0o077
		if want == info.Mode().Perm() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if err := os.Chmod(path, want); err != nil && !gone(path, err) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: making the store's files owner-only: %w", err)
	}
	return nil
}

// recover indexes the frames after the last one badger holds, writes the
// partial tiles of those after the last tiles badger holds and the entry
// locations of those after the locations mark (locfile.go), gives window
// those it indexed already from its position on (window.go), brings the
// latest signed checkpoint's two copies (the checkpoint history's and
// the checkpoint file's) to the later of the two, makes the result
// durable, and returns the number of entries.
func (s *Store) recover(ctx context.Context, log *slog.Logger, window *windowRebuild) (uint64, error) {
	var size, end, tilesEnd, locsEnd uint64
	cpSize, latest, hasCP := s.cps.last()
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		if size, _, err = getUint64(txn, keySize); err != nil {
			return err
		}
		if end, _, err = getUint64(txn, keyLogEnd); err != nil {
			return err
		}
		// Absent (a new store, or one whose mark was never synced):
		// replay every frame's tiles, and locations.
		if tilesEnd, _, err = getUint64(txn, keyTilesEnd); err != nil {
			return err
		}
		locsEnd, _, err = readLocationsMark(txn)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: reading the index: %w", err)
	}
	if tilesEnd > end {
		return 0, fmt.Errorf("%w: the index holds tiles up to log position %d but frames only up to %d", ledger.ErrCorrupt, tilesEnd, end)
	}
	if locsEnd > end {
		return 0, fmt.Errorf("%w: the locations file holds entry locations up to log position %d but the index frames only up to %d", ledger.ErrCorrupt, locsEnd, end)
	}
	fileSize, fileCP, err := readCheckpointFile(s.dir)
	if err != nil {
		return 0, err
	}
	signed := cpSize // entries a signed checkpoint covers
	if fileCP != nil {
		signed = max(signed, fileSize)
	}
	replayed := 0
	var next uint64 // the index the next frame must start at, once known
	known := false
	complete := tilesEnd // badger holds every tile up to here
	ack := acknowledged{indexEnd: int64(end), signed: signed}
	// The partial tiles the frames replayed so far made, by which the
	// next frames' tiles are rebuilt (replayTiles).
	replayedTiles := map[tileID][]byte{}
	dropped, err := s.log.recover(min(int64(min(tilesEnd, locsEnd)), window.from), size, ack, func(pos int64, payload []byte) (uint64, error) {
		b, frameTiles, locs, err := decodeFrame(payload)
		if err != nil {
			return 0, fmt.Errorf("%w: frame at log position %d: %w", ledger.ErrCorrupt, pos, err)
		}
		frameEnd := pos + frameHeaderSize + int64(len(payload))
		if uint64(frameEnd) > tilesEnd {
			if b.Tiles, err = s.replayTiles(frameTiles, replayedTiles); err != nil {
				return 0, fmt.Errorf("%w: frame at log position %d: %w", ledger.ErrCorrupt, pos, err)
			}
		}
		if known && b.Start != next {
			return 0, fmt.Errorf("%w: frame at log position %d starts at index %d, not %d", ledger.ErrCorrupt, pos, b.Start, next)
		}
		known, next, complete = true, b.Start+uint64(len(b.Entries)), uint64(frameEnd)
		for i := range locs {
			locs[i].pos += pos
		}
		if uint64(frameEnd) <= end {
			// Indexed already; only its tiles and entry locations may be
			// missing, and its records in the windows. The marks are set
			// once, at the end.
			if err := window.frame(s, pos, frameEnd, b); err != nil {
				return 0, err
			}
			if uint64(frameEnd) > locsEnd {
				if err := s.locations.write(b.Start, locs); err != nil {
					return 0, err
				}
			}
			if uint64(frameEnd) > tilesEnd {
				return next, s.indexTiles(b.Tiles, -1)
			}
			return next, nil
		}
		if b.Start != size {
			return 0, fmt.Errorf("%w: frame at log position %d starts at index %d, the index holds %d entries", ledger.ErrCorrupt, pos, b.Start, size)
		}
		// The tiles mark is set once, at the end, after the tile
		// files are synced.
		if err := s.index(b, locs, frameEnd, b.Tiles, false); err != nil {
			return 0, err
		}
		replayed++
		size += uint64(len(b.Entries))
		return size, nil
	})
	if err != nil {
		return 0, err
	}
	if size < signed {
		return 0, fmt.Errorf("%w: the frame log holds %d entries, but a checkpoint for a tree of %d was signed: "+
			"acknowledged entries are missing, and serving on would give their indices to other entries", ledger.ErrCorrupt, size, signed)
	}
	// From here on, tiles and locations not yet flushed are replayed from
	// this point: record it even for a new store, whose index has no marks
	// yet (indexTiles syncs the files first).
	if err := s.indexTiles(nil, int64(complete)); err != nil {
		return 0, err
	}
	restored, rebuilt := false, false
	switch {
	case fileCP != nil && (!hasCP || fileSize > cpSize):
		// The history lost it (a crash between the file and the
		// history, or the history lost).
		err = s.cps.add(fileSize, fileCP)
		restored = true
	case fileCP != nil && hasCP && fileSize == cpSize && !bytes.Equal(latest, fileCP):
		// The history may hold the latest checkpoint as it was before
		// signature lines were added to it (AddCheckpoint writes the file
		// first).
		if ledger.AddsSignatures(latest, fileCP) {
			err = s.cps.add(fileSize, fileCP)
			restored = true
		}
	case hasCP && (fileCP == nil || cpSize > fileSize):
		// The file lost, or older than the history's latest (a file
		// restored alone), or a store from before the checkpoint file.
		err = writeCheckpointFile(s.dir, cpSize, latest)
		rebuilt = true
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: restoring the latest checkpoint: %w", err)
	}
	s.latestCP, s.hasCP = signed, hasCP || fileCP != nil
	if dropped > 0 {
		log.WarnContext(ctx, "ledger: erased a frame whose write a crash cut short (never acknowledged)",
			slog.Uint64("size", size), slog.Int64("bytes", dropped))
		s.repairs = append(s.repairs, fmt.Sprintf("erased the last %d bytes of the frame log, a frame whose write a crash cut short (never acknowledged)", dropped))
	}
	if replayed > 0 {
		log.InfoContext(ctx, "ledger: indexed frames after a crash", slog.Int("frames", replayed), slog.Uint64("size", size))
		s.repairs = append(s.repairs, fmt.Sprintf("indexed %d frames the index had lost (a crash, or a lost index), up to %d entries", replayed, size))
	}
	if restored {
		log.WarnContext(ctx, "ledger: restored the latest signed checkpoint from the checkpoint file into the checkpoint history", slog.Uint64("checkpoint_size", fileSize))
		s.repairs = append(s.repairs, fmt.Sprintf("restored the latest signed checkpoint, for tree size %d, from the checkpoint file into the checkpoint history", fileSize))
	}
	if rebuilt {
		log.WarnContext(ctx, "ledger: rebuilt the checkpoint file from the checkpoint history's latest signed checkpoint (the file was missing or older)",
			slog.Uint64("checkpoint_size", cpSize))
		s.repairs = append(s.repairs, fmt.Sprintf("rebuilt the checkpoint file from the checkpoint history's latest signed checkpoint, for tree size %d (the file was missing or older)", cpSize))
	}
	if replayed > 0 || dropped > 0 {
		if err := s.db.Sync(); err != nil {
			return 0, fmt.Errorf("ledger: syncing the index: %w", err)
		}
	}
	return size, nil
}

// replayTiles returns the whole tiles a frame replayed at open writes,
// from the tiles the frame holds (frameTile): each with the hashes before
// its first from the version replayed last, kept in replayed, or else
// from the version the store holds. Replay starts at the tiles mark, and
// with the mark the store holds a version of every tile at least as
// recent as the mark's frame (a flush writes every version the overlay
// holds, pendingTiles; a tile's partial version in badger is deleted only
// with a mark, once the files holding its full version are synced,
// writeTiles); a later version begins with the same hashes, since Commit
// refuses a tile that does not extend the stored one. Badger's partial
// version is read first: a full tile written after the mark was not
// synced, and a crash may have torn its slot.
func (s *Store) replayTiles(frameTiles []frameTile, replayed map[tileID][]byte) ([]ledger.Tile, error) {
	tiles := make([]ledger.Tile, 0, len(frameTiles))
	for _, ft := range frameTiles {
		id := tileID{ft.level, ft.index}
		base, ok := replayed[id]
		if !ok && ft.first > 0 {
			var err error
			if base, err = s.storedTile(id, ft.first*ledger.HashSize); err != nil {
				return nil, err
			}
		}
		hashes, err := ft.rebuild(base)
		if err != nil {
			return nil, err
		}
		if len(hashes) == tileBytes {
			// No later frame adds to it.
			delete(replayed, id)
		} else {
			replayed[id] = hashes
		}
		tiles = append(tiles, ledger.Tile{Level: ft.level, Index: ft.index, Hashes: hashes})
	}
	return tiles, nil
}

// storedTile returns the version of tile id that badger holds if it has
// at least need bytes, else the one in the tile files if it reads whole,
// else badger's (or nil).
func (s *Store) storedTile(id tileID, need int) ([]byte, error) {
	var t []byte
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		t, err = getValue(txn, tileKey(id.level, id.index))
		return err
	})
	switch {
	case err == nil && len(t) >= need:
		return t, nil
	case err != nil && !errors.Is(err, badgerdb.ErrKeyNotFound):
		return nil, fmt.Errorf("ledger: reading tile %d/%d: %w", id.level, id.index, err)
	}
	if full, ok, err := s.tiles.read(id.level, id.index); err == nil && ok {
		return full, nil
	}
	return t, nil
}

// Repairs says what Open repaired, one sentence each, in the order done:
// a checkpoint a crash cut short at the end of the checkpoint history
// cut, or the history's index made whole, a frame a crash cut short
// erased, frames the index lost indexed again, the latest signed
// checkpoint restored into the history from the checkpoint file, or the
// file rebuilt from the history. It is empty when Open found the store as
// Close leaves it. Each is also logged, as a warning but for the frames
// indexed again (routine after a crash).
func (s *Store) Repairs() []string { return slices.Clone(s.repairs) }

// tileFlushInterval is how often the indexer writes the partial tiles
// the overlay holds to badger. Between two flushes a commit's index
// carries only the tiles it completed: the partial tile at the tree's
// right edge, rewritten by every commit, would otherwise be most of what
// badger writes.
var tileFlushInterval = 250 * time.Millisecond // a var for tests

// frameEncoder encodes a Commit's frame: encodeFrame, but in tests that
// write the format before the delta format.
var frameEncoder = encodeFrame

// runIndexer indexes durable frames in badger, in order, until the store
// closes and none is left, or until indexing fails. It writes each
// frame's full tiles with its index, and every tile version the overlay
// holds (pendingTiles) every tileFlushInterval and when it stops;
// recovery replays the tiles of the frames after the last flush.
//
// While less than the floor is free (roomForIndex) it writes nothing: it
// waits for space, and if the store closes first it stops, leaving the
// frames not yet indexed, and the partial tiles, to the next Open, which
// indexes them from the frame log as after a crash.
func (s *Store) runIndexer() {
	defer close(s.indexerDone)
	lastFlush := time.Now()
	var pendingTilesEnd int64 = -1 // log end of the last frame indexed since a flush
	fail := func(err error) {
		s.writeMu.Lock()
		s.broken = err
		s.writeMu.Unlock()
		s.ov.fail(err)
	}
	for {
		f := s.ov.next()
		if f == nil {
			if pendingTilesEnd >= 0 && s.waitForRoom() {
				if err := s.indexTiles(s.ov.pendingTiles(), pendingTilesEnd); err != nil {
					fail(err)
				}
			}
			return
		}
		if !s.waitForRoom() {
			return
		}
		flush := time.Since(lastFlush) >= tileFlushInterval
		tiles := fullTiles(f.batch.Tiles)
		if flush {
			// Every tile version the overlay holds: this frame's and
			// those of frames before it not yet written, and later
			// frames' (newer, and harmless: a tile only grows), full
			// ones too (pendingTiles).
			tiles = append(tiles, s.ov.pendingTiles()...)
		}
		if err := s.index(f.batch, f.locs, f.end, tiles, flush); err != nil {
			fail(err)
			return
		}
		if flush {
			lastFlush, pendingTilesEnd = time.Now(), -1
		} else {
			pendingTilesEnd = f.end
		}
		s.ov.indexed(f, flush)
	}
}

// fullTiles returns the tiles of ts that are full.
func fullTiles(ts []ledger.Tile) []ledger.Tile {
	var full []ledger.Tile
	for _, t := range ts {
		if len(t.Hashes) == ledger.TileWidth*ledger.HashSize {
			full = append(full, t)
		}
	}
	return full
}

// indexTiles writes tiles (writeTiles) and, unless end is negative,
// records that the tiles of the frames up to log position end are stored,
// once the tile files are synced.
func (s *Store) indexTiles(tiles []ledger.Tile, end int64) error {
	w := indexWriter{db: s.db, txn: s.db.NewTransaction(true)}
	defer func() { w.txn.Discard() }()
	s.writeTiles(&w, tiles)
	if end >= 0 {
		s.tilesDone(&w, end)
	}
	if w.err == nil {
		w.err = w.txn.Commit()
	}
	if w.err != nil {
		return fmt.Errorf("ledger: writing tiles: %w", w.err)
	}
	return nil
}

// Close closes the index and the frame log. Calling it again returns the
// first call's result.
//
// On a file system with less than half the reserve (at most 64 MiB) free,
// Close writes nothing to badger: it neither indexes the frames not yet
// indexed nor closes badger, whose close writes its memtable to a new
// table through a mapped file, which on a full disk kills the process.
// It closes the rest and returns an error wrapping ErrNoSpace; badger's
// index is left as a crash leaves it, and the next Open, once there is
// space, recovers it from the frame log, which holds every committed
// entry. Badger keeps its own lock on the index until the process ends,
// so only another process can open the store again.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		close(s.stopping)
		if s.ov != nil {
			s.ov.mu.Lock()
			s.ov.stop = true
			s.ov.cond.Broadcast()
			s.ov.mu.Unlock()
		}
		<-s.indexerDone // it indexes what is pending first, if there is room
		if err := s.leaves.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the leaf-hash index: %w", err))
		}
		if err := s.keys.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the idempotency-key index: %w", err))
		}
		if err := s.roomForIndex("closing the index"); err != nil {
			s.logger.Error("ledger: the store closed without writing its index: the next open indexes the frame log's entries again",
				slog.Any("error", err))
			errs = append(errs, fmt.Errorf("%w; badger's index was left as a crash leaves it, for the next open to recover from the frame log, which holds every committed entry", err))
		} else if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing badger index: %w", err))
		}
		if err := s.log.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the frame log: %w", err))
		}
		if err := s.tiles.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the tile files: %w", err))
		}
		if err := s.cps.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the checkpoint history: %w", err))
		}
		if err := s.locations.close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: closing the locations file: %w", err))
		}
		// Last: until here this process may still write.
		if err := s.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ledger: unlocking the store: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// State implements Store.
func (s *Store) State(ctx context.Context) (ledger.State, error) {
	var st ledger.State
	if size, signed, ok := s.cps.last(); ok {
		st.CheckpointSize, st.Checkpoint = size, bytes.Clone(signed)
	}
	// After the checkpoint: the size only grows, so it covers it.
	st.Size = s.ov.durableSize()
	return st, nil
}

// freeAbove reports whether more than the reserve and extra bytes are
// free.
func (s *Store) freeAbove(extra uint64) bool {
	free, err := freeSpace(s.dir)
	return err == nil && free >= s.reserve+extra
}

// freeSpace is freeBytes; the tests replace it.
var freeSpace = freeBytes

// maxIndexFloor caps indexFloor: badger's own writes (its memtables'
// flushes, its compactions, tables of 512 KiB) take a few tens of MiB with
// this store's options.
const maxIndexFloor = 64 << 20

// indexFloor is the free space below which a Store with the given reserve
// writes nothing to badger: half the reserve, at most maxIndexFloor. It
// is below the reserve, so that once commits stop the indexer can still
// write what is pending, and checkpoints can still be signed.
func indexFloor(reserve uint64) uint64 { return min(reserve/2, maxIndexFloor) }

// roomForIndex refuses a write to badger while less than the floor is
// free. Badger writes its memtable's log and its new tables into files it
// maps after extending them without allocating their blocks, and a write
// into a page the file system then cannot allocate kills the process
// with SIGBUS, in badger's goroutines, instead of returning an error:
// badger offers no way to allocate the files first. Commits stop at the
// reserve, above the floor; other programs may fill the file system
// further.
func (s *Store) roomForIndex(what string) error {
	free, err := freeSpace(s.dir)
	if err != nil {
		return fmt.Errorf("ledger: %s: measuring free space: %w", what, err)
	}
	if free < s.floor {
		return fmt.Errorf("%w: %s: %d bytes are free on the store's file system, under the %d its badger index needs to write safely (half of badger.Options.ReserveBytes, at most 64 MiB)",
			ErrNoSpace, what, free, s.floor)
	}
	return nil
}

// roomPollInterval is how often an indexer waiting for space measures it.
const roomPollInterval = time.Second

// waitForRoom returns true once the floor is free (at once, mostly), or
// false once the store is closing while it is not.
func (s *Store) waitForRoom() bool {
	err := s.roomForIndex("indexing")
	if err == nil {
		return true
	}
	select {
	case <-s.stopping:
		return false // Close logs it
	default:
	}
	s.logger.Error("ledger: indexing paused until there is space: the frame log holds the entries not yet indexed", slog.Any("error", err))
	t := time.NewTicker(roomPollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return false
		case <-t.C:
		}
		if s.roomForIndex("indexing") == nil {
			s.logger.Info("ledger: indexing resumed")
			return true
		}
	}
}

// ErrNoSpace: a Store refused a write because its file system has
// less free space than Options.ReserveBytes.
var ErrNoSpace = errors.New("ledger: too little free space")

// checkReserve refuses a write while less than the reserve is free.
// Checkpoints are not refused: the reserve is there for the index and
// for them.
func (s *Store) checkReserve(what string) error {
	free, err := freeSpace(s.dir)
	if err != nil {
		return fmt.Errorf("ledger: %s: measuring free space: %w", what, err)
	}
	if free < s.reserve {
		return fmt.Errorf("%w: %s: %d bytes are free on the store's file system, under the %d it keeps in reserve (badger.Options.ReserveBytes); nothing was written",
			ErrNoSpace, what, free, s.reserve)
	}
	return nil
}

// errStoreBroken wraps the failure after which a Store refuses
// writes.
var errStoreBroken = errors.New("ledger: the store stopped after a failed write; reopen it")

// Commit implements Store: one frame, written and synced, then indexed.
func (s *Store) Commit(ctx context.Context, b ledger.Batch) error {
	if err := b.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: batch at %d: %w", b.Start, err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.broken != nil {
		return fmt.Errorf("%w: %w", errStoreBroken, s.broken)
	}
	if size := s.ov.durableSize(); b.Start != size {
		return fmt.Errorf("ledger: batch at %d: stored size is %d: %w", b.Start, size, ledger.ErrConflict)
	}
	if err := s.checkReserve(fmt.Sprintf("batch at %d", b.Start)); err != nil {
		return err
	}
	if err := s.checkKeysUnused(b); err != nil {
		return err
	}
	if err := s.checkTilesExtend(b); err != nil {
		return err
	}
	frame, locs, err := frameEncoder(s.buf[:0], b, s.locs)
	if err != nil {
		return err
	}
	// Keep the buffers for the next batch unless this one was unusually
	// large.
	if cap(frame) <= 4<<20 {
		s.buf, s.locs = frame, locs
	}
	pos, err := s.log.append(frame)
	if err != nil {
		// The frame may be durable or not: only a reopen can tell.
		s.broken = err
		return fmt.Errorf("ledger: committing batch at %d: %w", b.Start, err)
	}
	s.ov.add(b, pos, pos+int64(len(frame)), locs)
	return nil
}

// checkKeysUnused refuses a batch with an idempotency key already stored:
// in the overlay, the key runs or their window, as keyIndexOf looks, but
// with one hold of the runs for the batch. The overlay is read first: a
// frame leaves it only once the window has it, and the window's records
// leave it only for a run, in one step under the runs' lock, so the runs
// and the window, read after, hold every key the overlay lacked.
func (s *Store) checkKeysUnused(b ledger.Batch) error {
	stored := func() error {
		return fmt.Errorf("ledger: batch at %d: an idempotency key is already stored: %w", b.Start, ledger.ErrConflict)
	}
	n := 0
	for _, k := range b.Keys {
		if len(k) == 0 {
			continue
		}
		if _, ok := s.ov.keyIndex(k); ok {
			return stored()
		}
		n++
	}
	if n == 0 {
		return nil // most batches: no read transaction on the commit path
	}
	err := s.keys.withRuns(func(inRuns func([ledger.HashSize]byte) (uint64, bool, error)) error {
		end := s.keys.end() // withRuns holds the runs still
		for _, k := range b.Keys {
			if len(k) == 0 {
				continue
			}
			// A key the ledger looked up for a replay and found in no
			// run is in none still, while the runs end where they did.
			h := keyHash(k)
			if !s.keys.takeMissed(h, end) {
				if _, ok, err := inRuns(h); err != nil || ok {
					if ok {
						return stored()
					}
					return err
				}
			}
			if _, ok := s.keys.inWindow(h); ok {
				return stored()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ledger.ErrConflict) {
		return fmt.Errorf("ledger: batch at %d: looking up idempotency keys: %w", b.Start, err)
	}
	return err
}

// checkTilesExtend refuses, wrapping ErrConflict, a batch with a tile
// that does not begin with the stored tile's hashes, as many as the tile
// has in the tree of b.Start entries: the frame holds only the hashes
// after those (framelog.go), so that a tile rebuilt from the frames would
// not be the tile committed. A ledger's batches only ever extend a tile.
// The overlay holds the latest version of a tile a pending frame wrote,
// so the stored one is findTile's, as Tile reads it.
func (s *Store) checkTilesExtend(b ledger.Batch) error {
	for _, t := range b.Tiles {
		first := tileWidth(b.Start, t.Level, t.Index) * ledger.HashSize
		if first == 0 || len(t.Hashes) < first {
			continue // whole, or for encodeFrame to refuse
		}
		var stored []byte
		var ok bool
		var err error
		for range 2 { // as Tile: the indexer may move it meanwhile
			if stored, ok, err = s.findTile(t.Level, t.Index); err != nil || ok {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("ledger: batch at %d: reading tile %d/%d: %w", b.Start, t.Level, t.Index, err)
		}
		if len(stored) < first || !bytes.Equal(stored[:first], t.Hashes[:first]) {
			return fmt.Errorf("ledger: batch at %d: tile %d/%d does not extend the stored tile: its first %d hashes are not the %d stored: %w",
				b.Start, t.Level, t.Index, first/ledger.HashSize, len(stored)/ledger.HashSize, ledger.ErrConflict)
		}
	}
	return nil
}

// index writes badger's index of the frame of b, ending at log position
// end, with tiles, and adds its leaf hashes and keys to the windows
// (window.go), writing a window as a run once it holds runSize entries;
// locs are the entries' locations (b.Entries and b.Tiles are not read).
// tilesDone says tiles hold every tile version up to this frame. A batch
// too large for one badger transaction is written in several: the last
// one sets the size and the log position. Re-indexing a frame after a
// crash writes the same keys and values.
func (s *Store) index(b ledger.Batch, locs []entryLocation, end int64, tiles []ledger.Tile, tilesDone bool) error {
	w := indexWriter{db: s.db, txn: s.db.NewTransaction(true)}
	defer func() { w.txn.Discard() }()
	// The locations file before badger: a frame leaves the overlay only
	// once both hold it.
	w.err = s.locations.write(b.Start, locs)
	s.writeTiles(&w, tiles)
	w.set(keySize, binary.BigEndian.AppendUint64(nil, b.Start+uint64(len(locs))))
	w.set(keyLogEnd, binary.BigEndian.AppendUint64(nil, uint64(end)))
	if tilesDone {
		s.tilesDone(&w, end)
	}
	if w.err == nil {
		w.err = w.txn.Commit()
	}
	if w.err != nil {
		return fmt.Errorf("ledger: indexing batch at %d: %w", b.Start, w.err)
	}
	// The leaf hashes and keys, in the windows after the runs
	// (window.go), which may become a run here.
	return s.addToWindows(b, len(locs), end)
}

// writeTiles writes tiles: a full one to the tile files (tilefile.go); a
// partial one to badger, removing a full version of it from the files.
// The partial version a flush may have written of a tile now full stays
// in badger until the next tiles mark (tilesDone deletes it, once the
// files are synced): until then the full one may be lost in a crash, and
// a reopen that replays the frames after the mark rebuilds the tile from
// the partial one (replayTiles).
func (s *Store) writeTiles(w *indexWriter, tiles []ledger.Tile) {
	for _, t := range tiles {
		if w.err != nil {
			return
		}
		id := tileID{t.Level, t.Index}
		if len(t.Hashes) == tileBytes {
			if w.err = s.tiles.write(t.Level, t.Index, t.Hashes); w.err == nil {
				s.filled[id] = true
			}
			continue
		}
		if w.err = s.tiles.clear(t.Level, t.Index); w.err == nil {
			delete(s.filled, id)
			w.set(tileKey(t.Level, t.Index), t.Hashes)
		}
	}
}

// tilesDone records in w's transaction that the tiles of the frames up to
// log position end are stored, after syncing the tile files: badger may
// make the record durable at any time (its memtable is a mapped file), so
// the files must be durable first.
func (s *Store) tilesDone(w *indexWriter, end int64) {
	if w.err != nil {
		return
	}
	if w.err = s.tiles.sync(); w.err == nil {
		// The partial versions of the tiles full in the files now synced.
		for id := range s.filled {
			w.delete(tileKey(id.level, id.index))
		}
		clear(s.filled)
		w.set(keyTilesEnd, binary.BigEndian.AppendUint64(nil, uint64(end)))
		// Open refuses files shorter than this: lost, not replayable.
		w.set(keyTileFiles, s.tiles.sizesRecord())
	}
	// The entry locations have the same mark, one of their own.
	s.locationsDone(w, end)
}

// checkTileFiles refuses tile files shorter than they were when the tiles
// mark was last written: the tiles they lost are not among those Open
// replays.
func (s *Store) checkTileFiles() error {
	var record []byte
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		record, err = getValue(txn, keyTileFiles)
		return err
	})
	switch {
	case errors.Is(err, badgerdb.ErrKeyNotFound):
		return nil // a new store, or one written before the tile files
	case err != nil:
		return fmt.Errorf("ledger: reading the index: %w", err)
	}
	return s.tiles.checkSizes(record)
}

// migrateTiles moves the full tiles that a store written before the tile
// files kept in badger into the files: it writes them, syncs the files,
// and then deletes them from badger. A crash between the two leaves them
// in both places, and the next Open moves them again; after it badger's
// tiles are the few partial ones, so the scan costs little.
func (s *Store) migrateTiles(ctx context.Context, log *slog.Logger) error {
	var moved [][]byte
	err := s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixTile}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			if len(key) != 10 {
				return fmt.Errorf("%w: a tile key of %d bytes", ledger.ErrCorrupt, len(key))
			}
			if item.ValueSize() != tileBytes {
				continue
			}
			if err := item.Value(func(v []byte) error {
				return s.tiles.write(key[1], binary.BigEndian.Uint64(key[2:]), v)
			}); err != nil {
				return err
			}
			moved = append(moved, key)
		}
		return nil
	})
	if err == nil && len(moved) > 0 {
		err = s.tiles.sync()
	}
	if err != nil {
		return fmt.Errorf("ledger: moving the full tiles from the index to %s: %w", tilesDir, err)
	}
	if len(moved) == 0 {
		return nil
	}
	w := indexWriter{db: s.db, txn: s.db.NewTransaction(true)}
	defer func() { w.txn.Discard() }()
	for _, key := range moved {
		w.delete(key)
	}
	if w.err == nil {
		w.err = w.txn.Commit()
	}
	if w.err != nil {
		return fmt.Errorf("ledger: deleting the full tiles moved to %s from the index: %w", tilesDir, w.err)
	}
	log.InfoContext(ctx, "ledger: moved the full tiles from the index to their files", slog.Int("tiles", len(moved)), slog.String("dir", tilesDir))
	return nil
}

// indexWriter sets and deletes keys in a transaction, committing it and
// starting another when it is full.
type indexWriter struct {
	db  *badgerdb.DB
	txn *badgerdb.Txn
	err error
}

func (w *indexWriter) set(key, value []byte) {
	w.do(func(txn *badgerdb.Txn) error { return txn.Set(key, value) })
}

func (w *indexWriter) delete(key []byte) {
	w.do(func(txn *badgerdb.Txn) error { return txn.Delete(key) })
}

func (w *indexWriter) do(op func(*badgerdb.Txn) error) {
	if w.err != nil {
		return
	}
	err := op(w.txn)
	if errors.Is(err, badgerdb.ErrTxnTooBig) {
		if err = w.txn.Commit(); err != nil {
			w.err = err
			return
		}
		w.txn = w.db.NewTransaction(true)
		err = op(w.txn)
	}
	w.err = err
}

// Entry implements Store.
func (s *Store) Entry(ctx context.Context, index uint64) ([]byte, error) {
	if index >= s.ov.durableSize() {
		return nil, fmt.Errorf("ledger: entry %d: %w", index, ledger.ErrNotFound)
	}
	loc, err := s.location(index)
	if err != nil {
		return nil, err
	}
	// Exactly the entry's bytes: a reader's window would read a MiB.
	r := entryReader{buf: make([]byte, loc.length)}
	return r.read(s.log, index, loc)
}

// readWindow is how much of the frame log ReadEntries reads at once.
const readWindow = 1 << 20

// entryReader reads entries from the frame log through a window, checking
// each one's checksum. The slice it returns is valid until the next read.
type entryReader struct {
	buf    []byte
	window []byte // log bytes from windowPos
	pos    int64
}

func (r *entryReader) read(log *frameLog, index uint64, loc entryLocation) ([]byte, error) {
	n := int64(loc.length)
	if loc.pos < r.pos || loc.pos+n > r.pos+int64(len(r.window)) {
		if len(r.buf) < int(n) {
			r.buf = make([]byte, max(int(n), readWindow))
		}
		w, err := log.readAt(r.buf, loc.pos, int(n))
		if err != nil {
			return nil, fmt.Errorf("ledger: reading entry %d: %w", index, err)
		}
		r.window, r.pos = w, loc.pos
	}
	e := r.window[loc.pos-r.pos : loc.pos-r.pos+n]
	if crc32.Checksum(e, castagnoli) != loc.crc {
		return nil, fmt.Errorf("%w: entry %d fails its checksum at log position %d", ledger.ErrCorrupt, index, loc.pos)
	}
	return e, nil
}

// ReadEntries implements Store: the indexed entries, their locations read
// from the locations file a range at a time, then those still in the
// overlay, from the frames pending when it started.
func (s *Store) ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error {
	size, pending := s.ov.snapshot()
	if start > end || end > size {
		return fmt.Errorf("ledger: entries [%d, %d) of %d: %w", start, end, size, ledger.ErrNotFound)
	}
	indexed := size // entries below this are indexed
	if len(pending) > 0 {
		indexed = pending[0].batch.Start
	}
	var r entryReader
	if start < indexed {
		if err := s.readIndexed(ctx, &r, start, min(end, indexed), fn); err != nil {
			return err
		}
	}
	for _, f := range pending {
		for i, loc := range f.locs {
			index := f.batch.Start + uint64(i)
			if index < start || index >= end {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := r.read(s.log, index, loc)
			if err != nil {
				return err
			}
			if err := fn(index, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// readIndexed reads entries [start, end), all indexed, their locations
// locReadChunk at a time.
func (s *Store) readIndexed(ctx context.Context, r *entryReader, start, end uint64, fn func(index uint64, entry []byte) error) error {
	locs := make([]entryLocation, min(end-start, locReadChunk))
	for index := start; index < end; {
		chunk := locs[:min(end-index, uint64(len(locs)))]
		if err := s.locations.read(index, chunk); err != nil {
			return err // it names the entry
		}
		for _, loc := range chunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := r.read(s.log, index, loc)
			if err != nil {
				return err
			}
			if err := fn(index, e); err != nil {
				return err
			}
			index++
		}
	}
	return nil
}

// IndexOf implements Store: the overlay first (a frame leaves it only once
// the window has it), then the leaf-hash index (runindex.go), whose runs
// hold the older leaf hashes and its window in memory the others; the
// lower of the two.
func (s *Store) IndexOf(ctx context.Context, leafHash [ledger.HashSize]byte) (uint64, error) {
	index, found := s.ov.leafIndex(leafHash)
	i, ok, err := s.leaves.lookup(leafHash)
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: looking up leaf hash %x: %w", leafHash, err)
	case ok && (!found || i < index):
		index, found = i, true
	}
	if !found {
		return 0, fmt.Errorf("ledger: leaf hash %x: %w", leafHash, ledger.ErrNotFound)
	}
	// The size after the lookup: it only grows.
	if size := s.ov.durableSize(); index >= size {
		return 0, fmt.Errorf("%w: the leaf-hash index gives entry %d, beyond the %d stored", ledger.ErrCorrupt, index, size)
	}
	return index, nil
}

// IndexOfKey implements Store: the overlay first, then the
// idempotency-key index (keyIndexOf).
func (s *Store) IndexOfKey(ctx context.Context, key []byte) (uint64, error) {
	if len(key) == 0 {
		return 0, fmt.Errorf("ledger: idempotency key: %w", ledger.ErrNotFound)
	}
	index, found, err := s.keyIndexOf(key)
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: looking up an idempotency key: %w", err)
	case !found:
		return 0, fmt.Errorf("ledger: idempotency key: %w", ledger.ErrNotFound)
	case index >= s.ov.durableSize():
		return 0, fmt.Errorf("%w: the index gives an idempotency key entry %d, beyond the %d stored", ledger.ErrCorrupt, index, s.ov.durableSize())
	}
	return index, nil
}

// keyIndexOf returns the index of the entry committed with the non-empty
// key, and whether one was: the overlay (a frame leaves it only once the
// window has it), then the key runs, which hold the SHA-256 of the keys
// of the older entries (keyHash), then the window, which holds those of
// the others.
func (s *Store) keyIndexOf(key []byte) (uint64, bool, error) {
	if index, ok := s.ov.keyIndex(key); ok {
		return index, true, nil
	}
	return s.keys.lookup(keyHash(key))
}

// Tile implements Store: the overlay's version if a pending frame wrote
// one, else the full tile in the tile files, else badger's partial one.
// A tile of the tree that is in none of them was lost: damage.
func (s *Store) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	// The size first: every tile of the tree of this size was in the
	// overlay before the size was, and is in one of the three places from
	// then on.
	size := s.ov.durableSize()
	if !ledger.TileInTree(size, level, index) {
		t, ok, err := s.findTile(level, index)
		if err == nil && !ok {
			err = fmt.Errorf("ledger: tile %d/%d: %w", level, index, ledger.ErrNotFound)
		}
		return t, err
	}
	// Twice: the indexer may move the tile while it is looked for (a
	// tile that fills is written to its file, then its partial version
	// deleted from badger), but not twice between two looks.
	for range 2 {
		if t, ok, err := s.findTile(level, index); err != nil || ok {
			return t, err
		}
	}
	return nil, fmt.Errorf("%w: tile %d/%d of the tree of %d entries is missing: its slot in %s holds no tile, and the index no version of it",
		ledger.ErrCorrupt, level, index, size, filepath.Join(tilesDir, tileFileName(level)))
}

// findTile looks for the last version of tile level/index in the
// overlay, the tile files and badger, in that order.
func (s *Store) findTile(level uint8, index uint64) ([]byte, bool, error) {
	if t, ok := s.ov.tile(level, index); ok {
		return t, true, nil
	}
	t, ok, err := s.tiles.read(level, index)
	if err != nil || ok {
		return t, ok, err
	}
	err = s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		t, err = getValue(txn, tileKey(level, index))
		return err
	})
	switch {
	case errors.Is(err, badgerdb.ErrKeyNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("ledger: reading tile %d/%d: %w", level, index, err)
	}
	return t, true, nil
}

// AddCheckpoint implements Store: the checkpoint file first, synced, so
// that no loss of the history or the index can lose the latest signed
// checkpoint, then the checkpoint history (cphistory.go), synced; beside
// them, badger's DB.Sync, which makes durable the index of every batch
// before it (so that a reopen after a crash has fewer frames to index
// again).
func (s *Store) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	if len(signed) == 0 {
		return errEmptyCheckpoint
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: checkpoint for size %d: %w", size, err)
	}
	s.writeMu.Lock()
	err := s.broken
	switch durable := s.ov.durableSize(); {
	case err != nil:
		err = fmt.Errorf("%w: %w", errStoreBroken, err)
	case s.hasCP && size <= s.latestCP && !s.extendsLatestCP(size, signed):
		err = fmt.Errorf("ledger: checkpoint for size %d: latest is for size %d: %w", size, s.latestCP, ledger.ErrConflict)
	case size > durable:
		err = fmt.Errorf("ledger: checkpoint for size %d: tree size is %d: %w", size, durable, ledger.ErrConflict)
	}
	s.writeMu.Unlock()
	if err != nil {
		return err
	}
	if err := s.roomForIndex(fmt.Sprintf("checkpoint for size %d", size)); err != nil {
		return fmt.Errorf("%w; nothing was written", err)
	}
	// The reserve is not checked: it exists for the index and for this
	// (the floor, below it, is).
	// Badger's sync, of every index written before it, does not depend on
	// the checkpoint, which badger no longer holds: it runs beside the
	// files' writes and syncs, and is waited for.
	synced := make(chan error, 1)
	go func() { synced <- s.db.Sync() }()
	// Outside writeMu, as badger's sync: commits go on meanwhile.
	// AddCheckpoint runs one call at a time, so latestCP stays as
	// checked.
	if err := writeCheckpointFile(s.dir, size, signed); err != nil {
		<-synced
		// The file may hold the old checkpoint or the new one.
		s.writeMu.Lock()
		s.broken = err
		s.writeMu.Unlock()
		return fmt.Errorf("ledger: adding checkpoint for size %d: %w", size, err)
	}
	s.latestCP, s.hasCP = size, true
	err = s.cps.add(size, signed)
	if serr := <-synced; err == nil {
		err = serr
	}
	if err != nil {
		// The history may hold the checkpoint without having synced it.
		s.writeMu.Lock()
		s.broken = err
		s.writeMu.Unlock()
		return fmt.Errorf("ledger: adding checkpoint for size %d: %w", size, err)
	}
	return nil
}

// extendsLatestCP reports whether signed is the latest checkpoint with
// signature lines added (see Store.AddCheckpoint). Called with writeMu
// held.
func (s *Store) extendsLatestCP(size uint64, signed []byte) bool {
	if size != s.latestCP {
		return false
	}
	latestSize, latest, ok := s.cps.last()
	return ok && latestSize == size && ledger.AddsSignatures(latest, signed)
}

// Checkpoint implements Store, from the checkpoint history: a size
// above the latest's or below the first's is answered without a read,
// the latest's from memory, any other with a search of the history's
// index (cpHistory.search).
func (s *Store) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	v, ok, err := s.cps.get(size)
	switch {
	case err != nil:
		return nil, fmt.Errorf("ledger: reading checkpoint for size %d: %w", size, err)
	case !ok:
		return nil, fmt.Errorf("ledger: checkpoint for size %d: %w", size, ledger.ErrNotFound)
	}
	return v, nil
}

// getValue returns a copy of the value at key, which stays valid after txn
// ends, or badgerdb.ErrKeyNotFound.
func getValue(txn *badgerdb.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// getUint64 returns the integer at key and whether it is stored.
func getUint64(txn *badgerdb.Txn, key []byte) (uint64, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: the index's value of a key of kind %q is %d bytes, not a uint64", ledger.ErrCorrupt, key[:1], len(v))
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	return n, err == nil, err
}

// badgerLogger adapts slog to badgerdb.Logger. Badger reports routine work at
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
