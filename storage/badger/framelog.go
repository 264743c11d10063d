package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// The frame log is where a Store makes a batch durable: one frame
// per Commit, appended to segment files with one write and one fdatasync.
// The store then indexes the frame (entry positions in the locations
// file, leaf hashes, idempotency keys, tiles, tree size) without a sync of
// its own, and a reopen replays whatever frames the index had not
// recorded durably. So the acknowledged
// state is the frame log; badger's copy of it is rebuilt on open.
//
// A frame, all integers big-endian:
//
//	u32 payload length
//	u32 CRC-32C (Castagnoli) of the payload
//	payload:
//	  u64 start             index of the first entry
//	  u32 n                 number of entries, at least 1
//	  u32 t                 bit 31 set (the delta format, below); bits 0
//	                        to 30: number of tile records
//	  n × entry record:     u32 entry length, u32 CRC-32C of the entry,
//	                        [32]byte leaf hash, u16 key length, key
//	  t × tile record:      u8 level, u64 index, u16 first, u16 count
//	                        (at least 1, first+count at most 256),
//	                        count hashes
//	  the n entries' bytes, concatenated in index order
//
// A frame holds only the hashes its batch adds to the tree's tiles (the
// delta format). A tile record holds a tile's hashes from index first on;
// first is the tile's width in the tree of start entries, (start >> 8L)
// − 256·index at level L, clamped to 0 to 256, which the reader checks (a
// frame that disagrees is damage). The hashes before first are the tile
// as the frames before this one left it: a reader rebuilds the whole tile
// from that version and the record, and Commit refuses a batch whose tile
// does not begin with the stored tile's first hashes (ledger.ErrConflict),
// so that a tile rebuilt from the frames is the tile committed.
//
// Level-0 tiles have no records: the hashes a batch adds to them are its
// leaf hashes, in the entry records. So a frame holds, before its tile
// records, the level-0 tiles from start/256 to (start+n-1)/256, each
// adding the leaf hashes of the frame's entries in it from its width at
// start (even one the batch left out: a store cannot tell that from a
// tile it lost). The records follow, in the batch's order, and a record
// of a tile replaces what the frame held of it before: a batch's level-0
// tile whose new hashes are not its leaf hashes (never a ledger's) has a
// record too. A batch's tile that adds no hash has no record.
//
// Frames written before the delta format have bit 31 of t clear, and
// tile records of u8 level, u64 index, u16 hash count and the tile's
// hashes from index 0: each a whole tile, of any level, written as it
// was committed. They are read as ever (a whole tile is a delta from
// width 0), and a log may hold old frames then new ones. (A version
// before the delta format refuses a delta frame, its tile count too large
// for the frame, as damage.)
//
// Segment files are named by the log position of their first byte, as
// 20 decimal digits and ".frames". A log position counts bytes across all
// segments: a segment's first position is the previous segment's first
// position plus its size. A frame never spans two segments.

const (
	frameHeaderSize = 8
	// maxFramePayload bounds a frame a reopen will read: far above any
	// batch a ledger builds (MaxBatchBytes is 512 KiB by default), so a
	// larger length can only be a torn or damaged header.
	maxFramePayload = 256 << 20
	segmentSuffix   = ".frames"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryLocation is where an entry's bytes are in the frame log, and their
// checksum; the locations file keeps one per entry (locfile.go).
type entryLocation struct {
	pos    int64
	length uint32
	crc    uint32
}

// deltaFormat is bit 31 of a frame's tile count: its tiles are deltas.
const deltaFormat = 1 << 31

// tileWidth returns the number of hashes tile level/index has in the tree
// of size entries: 0 to TileWidth.
func tileWidth(size uint64, level uint8, index uint64) int {
	if uint(level)*ledger.TileHeight >= 64 {
		return 0
	}
	n := size >> (ledger.TileHeight * uint(level)) // nodes at that tree level
	switch full := n / ledger.TileWidth; {
	case index < full:
		return ledger.TileWidth
	case index == full:
		return int(n % ledger.TileWidth)
	}
	return 0
}

// frameTile is what a frame holds of a tile: its hashes from index first
// on, the ones before being the tile as the frames before left it (first
// is 0 in frames written before the delta format, whose tiles are whole).
type frameTile struct {
	level  uint8
	index  uint64
	first  int
	hashes []byte
}

// encodeFrame appends the frame of b to buf and returns it, with the
// location of each entry relative to the frame's first byte. It refuses,
// wrapping ErrConflict, a batch with a tile that the delta format cannot
// hold: one with fewer hashes than it has in the tree of b.Start entries.
// (That a tile's first hashes are the stored ones is Commit's to check:
// the frame does not hold them.)
func encodeFrame(buf []byte, b ledger.Batch, locs []entryLocation) ([]byte, []entryLocation, error) {
	buf = append(buf, make([]byte, frameHeaderSize)...)
	frame := len(buf) - frameHeaderSize
	buf = binary.BigEndian.AppendUint64(buf, b.Start)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b.Entries)))
	count := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0) // the tile count, below
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
	tiles := uint32(0)
	for _, t := range b.Tiles {
		first := tileWidth(b.Start, t.Level, t.Index)
		have := len(t.Hashes) / ledger.HashSize
		if have < first {
			return nil, nil, fmt.Errorf("ledger: batch at %d: tile %d/%d has %d hashes, fewer than the %d it has in the tree of %d entries: %w",
				b.Start, t.Level, t.Index, have, first, b.Start, ledger.ErrConflict)
		}
		if t.Level == 0 && addsLeaves(b, t, first) || have == first {
			continue // it adds nothing
		}
		buf = append(buf, t.Level)
		buf = binary.BigEndian.AppendUint64(buf, t.Index)
		buf = binary.BigEndian.AppendUint16(buf, uint16(first))
		buf = binary.BigEndian.AppendUint16(buf, uint16(have-first))
		buf = append(buf, t.Hashes[first*ledger.HashSize:]...)
		tiles++
	}
	binary.BigEndian.PutUint32(buf[count:], tiles|deltaFormat)
	for i, e := range b.Entries {
		locs[i].pos = int64(len(buf) - frame)
		buf = append(buf, e...)
	}
	payload := buf[frame+frameHeaderSize:]
	if len(payload) > maxFramePayload {
		return nil, nil, fmt.Errorf("ledger: batch at %d is %d bytes, over the %d a frame holds: %w", b.Start, len(payload), maxFramePayload, ledger.ErrConflict)
	}
	binary.BigEndian.PutUint32(buf[frame:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[frame+4:], crc32.Checksum(payload, castagnoli))
	return buf, locs, nil
}

// addsLeaves reports whether level-0 tile t of batch b holds, after its
// first hashes, exactly the leaf hashes of b's entries in that tile.
func addsLeaves(b ledger.Batch, t ledger.Tile, first int) bool {
	end := b.Start + uint64(len(b.LeafHashes))
	switch {
	case t.Index < b.Start/ledger.TileWidth:
		// Full before the batch: it adds nothing.
		return len(t.Hashes) == ledger.TileWidth*ledger.HashSize
	case t.Index > (end-1)/ledger.TileWidth:
		return false // past the batch
	}
	from := t.Index*ledger.TileWidth + uint64(first) // the tile's first new entry
	end = min(end, (t.Index+1)*ledger.TileWidth)
	if len(t.Hashes) != (first+int(end-from))*ledger.HashSize {
		return false
	}
	rest := t.Hashes[first*ledger.HashSize:]
	for i := from; i < end; i++ {
		if !bytes.Equal(rest[:ledger.HashSize], b.LeafHashes[i-b.Start][:]) {
			return false
		}
		rest = rest[ledger.HashSize:]
	}
	return true
}

// leafTiles returns the level-0 tiles of the frame of b, which the frame
// does not write: for each tile its entries are in, their leaf hashes.
func leafTiles(b ledger.Batch) []frameTile {
	var tiles []frameTile
	end := b.Start + uint64(len(b.LeafHashes))
	for i := b.Start; i < end; {
		index := i / ledger.TileWidth
		next := min(end, (index+1)*ledger.TileWidth)
		hashes := make([]byte, 0, (next-i)*ledger.HashSize)
		for j := i; j < next; j++ {
			hashes = append(hashes, b.LeafHashes[j-b.Start][:]...)
		}
		tiles = append(tiles, frameTile{level: 0, index: index, first: int(i % ledger.TileWidth), hashes: hashes})
		i = next
	}
	return tiles
}

// decodeFrame parses a frame's payload (its checksum already checked)
// into a batch whose slices alias payload, without its tiles, which it
// returns as the frame holds them, and the entries' locations relative to
// the frame's first byte.
func decodeFrame(payload []byte) (ledger.Batch, []frameTile, []entryLocation, error) {
	fail := func(err error) (ledger.Batch, []frameTile, []entryLocation, error) {
		return ledger.Batch{}, nil, nil, err
	}
	r := frameReader{b: payload}
	var b ledger.Batch
	b.Start = r.u64()
	n, t := r.u32(), r.u32()
	delta := t&deltaFormat != 0
	t &^= deltaFormat
	if r.err != nil || n == 0 || uint64(n) > uint64(len(payload)) || uint64(t) > uint64(len(payload)) {
		return fail(errors.New("malformed frame header"))
	}
	b.Entries = make([][]byte, n)
	b.LeafHashes = make([][ledger.HashSize]byte, n)
	locs := make([]entryLocation, n)
	var keys [][]byte
	for i := range n {
		locs[i].length, locs[i].crc = r.u32(), r.u32()
		copy(b.LeafHashes[i][:], r.bytes(ledger.HashSize))
		if key := r.bytes(int(r.u16())); len(key) > 0 {
			if keys == nil {
				keys = make([][]byte, n)
			}
			keys[i] = key
		}
	}
	b.Keys = keys
	var tiles []frameTile
	if delta && r.err == nil {
		tiles = leafTiles(b)
	}
	for range t {
		ft := frameTile{level: r.u8(), index: r.u64()}
		if !delta {
			ft.hashes = r.bytes(int(r.u16()) * ledger.HashSize)
			tiles = append(tiles, ft)
			continue
		}
		ft.first = int(r.u16())
		count := int(r.u16())
		ft.hashes = r.bytes(count * ledger.HashSize)
		if r.err != nil {
			break
		}
		switch width := tileWidth(b.Start, ft.level, ft.index); {
		case count == 0 || ft.first+count > ledger.TileWidth:
			return fail(fmt.Errorf("tile %d/%d: a record of %d hashes from %d", ft.level, ft.index, count, ft.first))
		case ft.first != width:
			return fail(fmt.Errorf("tile %d/%d: its record adds hashes from %d, but the tile has %d in the tree of %d entries",
				ft.level, ft.index, ft.first, width, b.Start))
		}
		tiles = append(tiles, ft)
	}
	for i := range n {
		locs[i].pos = int64(frameHeaderSize + r.off)
		b.Entries[i] = r.bytes(int(locs[i].length))
	}
	switch {
	case r.err != nil:
		return fail(r.err)
	case r.off != len(payload):
		return fail(fmt.Errorf("%d bytes after the last entry", len(payload)-r.off))
	}
	for i, e := range b.Entries {
		if crc32.Checksum(e, castagnoli) != locs[i].crc {
			return fail(fmt.Errorf("entry %d fails its checksum", b.Start+uint64(i)))
		}
	}
	for _, ft := range tiles {
		if len(ft.hashes) == 0 || ft.first+len(ft.hashes)/ledger.HashSize > ledger.TileWidth {
			return fail(fmt.Errorf("tile %d/%d: %d hashes from %d", ft.level, ft.index, len(ft.hashes)/ledger.HashSize, ft.first))
		}
	}
	return b, tiles, locs, b.Check()
}

// rebuild returns the whole tile ft makes of base, the tile as the frames
// before ft's left it: base's first ft.first hashes and ft's. It fails if
// base has fewer than ft.first hashes.
func (ft frameTile) rebuild(base []byte) ([]byte, error) {
	if ft.first == 0 {
		return ft.hashes, nil
	}
	if len(base) < ft.first*ledger.HashSize {
		return nil, fmt.Errorf("tile %d/%d adds hashes from %d, but the tile it adds to has %d", ft.level, ft.index, ft.first, len(base)/ledger.HashSize)
	}
	return append(slices.Clip(base[:ft.first*ledger.HashSize]), ft.hashes...), nil
}

type frameReader struct {
	b   []byte
	off int
	err error
}

func (r *frameReader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b)-r.off {
		r.err = errors.New("frame ends early")
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *frameReader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *frameReader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *frameReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *frameReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// frameLog is the set of segment files in one directory. Appends come from
// one goroutine at a time (the store's single writer); reads from any.
//
// A new segment starts as a file of zero bytes written and synced ahead of
// need (the spare): appending into bytes the file already has lets
// fdatasync skip the file-size update in the file system's journal, which
// halves its latency on the reference machine (20 KB write+fdatasync,
// median of 500: 250 µs against 480 µs). So the last segment's file is
// longer than its frames; its end is where the frames stop (recover finds
// it). A segment that is complete is cut to its frames before the next
// one starts.
//
// The zeros are reserved as the log grows: a segment starting at log
// position p holds segmentReserve(p) bytes, which is p itself between
// minSegment and maxSegment. So a new log's first segment is 1 MiB, and
// each next one as large as the log before it (about 1, 1, 2, 4, 8 MiB)
// until they reach maxSegment. The zeros written ahead of the frames (the
// rest of the segment in use and the spare) are 2 MiB for a new log, at
// most about three times the frames written while segments grow, and at most
// two segments of maxSegment after that.
type frameLog struct {
	dir        string
	maxSegment int64
	// spareFits reports whether a spare of size bytes may be written
	// now; it is asked before each step of the writing.
	spareFits func(size int64) bool

	mu       sync.RWMutex
	segments []*segment // by first position; the last one takes appends

	spareMu   sync.Mutex
	spare     *os.File // a prepared spare, or nil
	preparing bool
	closing   bool
	prepared  sync.WaitGroup
}

// spareName is the spare segment file while it is prepared and waits.
const spareName = "spare.frames.tmp"

type segment struct {
	first int64 // log position of the file's first byte
	size  int64 // bytes of whole frames in the file
	f     *os.File
}

// minSegment is the size of a new log's first segment, and the least
// Options.SegmentSize.
const minSegment = 1 << 20

// segmentReserve returns the size of a segment that starts at log position
// first: the log's size so far, at least minSegment and at most
// maxSegment, so that segments double until they reach maxSegment. A
// segment takes frames up to this size; a frame larger than that still
// goes into an empty segment, alone.
func (l *frameLog) segmentReserve(first int64) int64 {
	return min(l.maxSegment, max(minSegment, first))
}

func (s *segment) end() int64 { return s.first + s.size }

func segmentName(first int64) string {
	return fmt.Sprintf("%020d%s", first, segmentSuffix)
}

// openFrameLog opens the segments in dir, creating dir if it is missing.
// It checks that the segments follow each other without gaps; their last
// frames are checked by recover, after which the caller has the spare
// prepared (prepareSpare), sized from where the frames end.
func openFrameLog(dir string, maxSegment int64, spareFits func(size int64) bool) (*frameLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating the frame log directory: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading the frame log directory: %w", err)
	}
	l := &frameLog{dir: dir, maxSegment: maxSegment, spareFits: spareFits}
	// A spare left by an earlier process may be half written.
	if err := os.Remove(filepath.Join(dir, spareName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ledger: removing an old spare segment: %w", err)
	}
	for _, d := range names {
		name := d.Name()
		if !strings.HasSuffix(name, segmentSuffix) {
			continue
		}
		first, err := strconv.ParseInt(strings.TrimSuffix(name, segmentSuffix), 10, 64)
		if err != nil || first < 0 || segmentName(first) != name {
			l.close()
			return nil, fmt.Errorf("%w: %s is not a segment name", ledger.ErrCorrupt, filepath.Join(dir, name))
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("ledger: opening segment: %w", err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			l.close()
			return nil, fmt.Errorf("ledger: opening segment: %w", err)
		}
		l.segments = append(l.segments, &segment{first: first, size: info.Size(), f: f})
	}
	// ReadDir sorts by name, and the names are fixed-width numbers.
	for i := 1; i < len(l.segments); i++ {
		if prev := l.segments[i-1]; prev.end() != l.segments[i].first {
			err := fmt.Errorf("%w: segment %s ends at log position %d but the next one starts at %d",
				ledger.ErrCorrupt, segmentName(prev.first), prev.end(), l.segments[i].first)
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// prepareSpare writes, in the background, a spare segment file of zero
// bytes for the segment after the last one, unless a spare is ready or on
// its way. Its size is segmentReserve of where the last segment ends when
// full (or of its end, if it holds more): the next segment starts there or
// before, so the spare holds it.
func (l *frameLog) prepareSpare() {
	l.mu.RLock()
	next := int64(0)
	if n := len(l.segments); n > 0 {
		last := l.segments[n-1]
		next = max(last.first+l.segmentReserve(last.first), last.end())
	}
	l.mu.RUnlock()
	size := l.segmentReserve(next)
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	if l.spare != nil || l.preparing || l.closing || !l.spareFits(size) {
		return
	}
	l.preparing = true
	l.prepared.Add(1)
	go func() {
		defer l.prepared.Done()
		f, err := l.writeSpare(size)
		l.spareMu.Lock()
		defer l.spareMu.Unlock()
		l.preparing = false
		if err != nil || l.closing {
			// Without a spare the next segment is a plain new file; a
			// half-written spare would hold space for nothing.
			if f != nil {
				l.removeSpare(f)
				f.Close()
			}
			return
		}
		l.spare = f
	}()
}

func (l *frameLog) writeSpare(size int64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(l.dir, spareName), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 256<<10)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		l.spareMu.Lock()
		closing := l.closing
		l.spareMu.Unlock()
		if closing {
			return f, errors.New("closing")
		}
		if !l.spareFits(size) {
			return f, errors.New("too little free space")
		}
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return f, err
		}
		// Sync as it goes: a long queue of zeros would make every
		// concurrent frame sync wait behind it.
		if err := syncData(f); err != nil {
			return f, err
		}
	}
	return f, f.Sync()
}

// isSpare reports whether f is still the file at the spare's path: only
// a process that has the store's lock changes that path, but a spare that
// is not the file this process wrote must never become a segment.
func (l *frameLog) isSpare(f *os.File) bool {
	info, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Lstat(filepath.Join(l.dir, spareName))
	return err == nil && os.SameFile(info, named)
}

// removeSpare removes the spare file f if the spare's path still names it.
func (l *frameLog) removeSpare(f *os.File) {
	if l.isSpare(f) {
		os.Remove(filepath.Join(l.dir, spareName))
	}
}

// takeSpare returns the prepared spare, or nil.
func (l *frameLog) takeSpare() *os.File {
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	f := l.spare
	l.spare = nil
	return f
}

// append writes frame at the end of the log and makes it durable; it
// returns the frame's log position. A frame that does not fit in the last
// segment starts a new one. After an error the log's end is unknown: the
// caller stops appending, and a reopen reads what is on disk.
func (l *frameLog) append(frame []byte) (int64, error) {
	l.mu.RLock()
	var last *segment
	if n := len(l.segments); n > 0 {
		last = l.segments[n-1]
	}
	l.mu.RUnlock()
	if last == nil || (last.size > 0 && last.size+int64(len(frame)) > l.segmentReserve(last.first)) {
		first := int64(0)
		if last != nil {
			first = last.end()
			if err := last.finish(); err != nil {
				return 0, err
			}
		}
		var err error
		if last, err = l.newSegment(first); err != nil {
			return 0, err
		}
	}
	if _, err := last.f.WriteAt(frame, last.size); err != nil {
		return 0, fmt.Errorf("ledger: writing a frame to segment %s: %w", segmentName(last.first), err)
	}
	if err := syncData(last.f); err != nil {
		return 0, fmt.Errorf("ledger: syncing segment %s: %w", segmentName(last.first), err)
	}
	pos := last.end()
	l.mu.Lock()
	last.size += int64(len(frame))
	l.mu.Unlock()
	return pos, nil
}

// newSegment creates the segment starting at log position first, from the
// spare if one is ready, makes its directory entry durable, and has the
// next spare prepared.
func (l *frameLog) newSegment(first int64) (*segment, error) {
	name := segmentName(first)
	path := filepath.Join(l.dir, name)
	var f *os.File
	if spare := l.takeSpare(); spare != nil {
		// Rename would replace an existing file without a word.
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			spare.Close()
			return nil, fmt.Errorf("ledger: creating segment %s: it exists already", name)
		}
		if !l.isSpare(spare) {
			spare.Close()
			return nil, fmt.Errorf("ledger: creating segment %s: the spare segment file %s is not the one this process wrote; is another process using the store?",
				name, filepath.Join(l.dir, spareName))
		}
		if err := os.Rename(filepath.Join(l.dir, spareName), path); err != nil {
			spare.Close()
			return nil, fmt.Errorf("ledger: creating segment %s: %w", name, err)
		}
		f = spare
	} else {
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return nil, fmt.Errorf("ledger: creating segment %s: %w", name, err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger: creating segment %s: %w", name, err)
	}
	s := &segment{first: first, f: f}
	l.mu.Lock()
	l.segments = append(l.segments, s)
	l.mu.Unlock()
	l.prepareSpare()
	return s, nil
}

// finish cuts a complete segment's file to its frames, so that the next
// segment starts where its file ends.
func (s *segment) finish() error {
	info, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("ledger: finishing segment %s: %w", segmentName(s.first), err)
	}
	if info.Size() == s.size {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("ledger: finishing segment %s: %w", segmentName(s.first), err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("ledger: finishing segment %s: %w", segmentName(s.first), err)
	}
	return nil
}

// segmentAt returns the segment holding log position pos.
func (l *frameLog) segmentAt(pos int64) (*segment, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i, found := slices.BinarySearchFunc(l.segments, pos, func(s *segment, pos int64) int {
		switch {
		case s.end() <= pos:
			return -1
		case s.first > pos:
			return 1
		}
		return 0
	})
	if !found {
		return nil, fmt.Errorf("%w: log position %d is in no segment", ledger.ErrCorrupt, pos)
	}
	return l.segments[i], nil
}

// readAt reads into buf from log position pos: at least need bytes, and
// more up to len(buf) if the segment holding pos has them. It returns the
// bytes read.
func (l *frameLog) readAt(buf []byte, pos int64, need int) ([]byte, error) {
	s, err := l.segmentAt(pos)
	if err != nil {
		return nil, err
	}
	l.mu.RLock()
	avail := s.end() - pos
	l.mu.RUnlock()
	if avail < int64(need) {
		return nil, fmt.Errorf("%w: %d bytes at log position %d run past the end of segment %s", ledger.ErrCorrupt, need, pos, segmentName(s.first))
	}
	buf = buf[:min(int64(len(buf)), avail)]
	if _, err := s.f.ReadAt(buf, pos-s.first); err != nil {
		return nil, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
	}
	return buf, nil
}

// acknowledged is what recover knows was acknowledged, from outside the
// frames: a frame that is not whole inside it is damage, never a torn
// write.
type acknowledged struct {
	indexEnd int64  // the index records the frames before this log position
	signed   uint64 // a signed checkpoint covers the entries below this index
}

// recover reads the frames from log position from to the end of the log
// and calls apply with each whole frame's position and payload, in order,
// until apply fails; apply returns the index the next frame must start
// at, and next is the index the first must start at. Zeros after the last
// whole frame are the unwritten rest of its segment. A frame that is not
// whole is either a write a crash cut short, which was never acknowledged
// and which recover erases, returning the bytes it dropped, or damage,
// which it refuses with errCorrupt, changing nothing (see endAt).
func (l *frameLog) recover(from int64, next uint64, ack acknowledged, apply func(pos int64, payload []byte) (uint64, error)) (dropped int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segments) == 0 {
		if from != 0 {
			return 0, fmt.Errorf("%w: the index records frames up to log position %d but the frame log is empty", ledger.ErrCorrupt, from)
		}
		return 0, nil
	}
	if end := l.segments[len(l.segments)-1].end(); from > end {
		return 0, fmt.Errorf("%w: the index records frames up to log position %d but the frame log ends at %d", ledger.ErrCorrupt, from, end)
	}
	for i, s := range l.segments {
		if s.end() <= from && i < len(l.segments)-1 {
			continue
		}
		pos := max(from, s.first)
		for pos < s.end() {
			payload, whole, err := readFrame(s, pos)
			if err != nil {
				return 0, err
			}
			if !whole {
				return l.endAt(i, pos, next, ack)
			}
			if next, err = apply(pos, payload); err != nil {
				return 0, err
			}
			pos += frameHeaderSize + int64(len(payload))
		}
	}
	return 0, nil
}

// readFrame reads the frame at pos in s; whole is false if it is torn.
func readFrame(s *segment, pos int64) (payload []byte, whole bool, err error) {
	var header [frameHeaderSize]byte
	off := pos - s.first
	if s.size-off < frameHeaderSize {
		return nil, false, nil
	}
	if _, err := s.f.ReadAt(header[:], off); err != nil {
		return nil, false, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
	}
	n := int64(binary.BigEndian.Uint32(header[:]))
	if n == 0 || n > maxFramePayload || n > s.size-off-frameHeaderSize {
		return nil, false, nil
	}
	payload = make([]byte, n)
	if _, err := s.f.ReadAt(payload, off+frameHeaderSize); err != nil {
		return nil, false, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
	}
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(header[4:]) {
		return nil, false, nil
	}
	return payload, true, nil
}

// sectorSize is the unit a disk writes whole or not at all. A crash during
// a frame's write leaves each of the frame's sectors either written or as
// it was, and in a segment that was zeros the unwritten ones are zeros.
const sectorSize = 512

// endAt decides what the bytes at log position pos in segment i are, where
// a frame for index next should start but no whole frame does. l.mu is
// held.
//
// Only zeros from pos to the end of the segment: the frames end there.
//
// A write a crash cut short (a torn write), which is erased, is one that
// has all of these marks, because a torn write can leave no other:
//   - it is in the last segment (a segment is finished, its last frame
//     whole, before the next one starts);
//   - nothing acknowledged covers it: the index records no frame at or
//     after pos, and no signed checkpoint covers entry next;
//   - its header, where the sector holding it is written, starts it at
//     entry next;
//   - nothing is written after it: its header gives its length, and every
//     byte of the segment after that length is zero (or the file ends
//     before the length, or within the header: the write that would have
//     grown the file stopped);
//   - it is visibly unfinished: it runs past the end of the file, or one
//     of its sectors (a whole sector of the file, or the part of its last
//     sector it fills) is all zeros. A frame always ends with an entry's
//     bytes and holds no sector of zeros, so a frame whose every sector is
//     written and which still fails its checksum was changed after its
//     write.
//
// Anything else is damage: endAt refuses it with errCorrupt naming where
// and why, and changes nothing. The price of the rule is that a power
// loss that persisted a frame's later sectors but not its first one is
// refused too, since the length that would bound it is lost: an operator
// must look, rather than the store guess.
func (l *frameLog) endAt(i int, pos int64, next uint64, ack acknowledged) (int64, error) {
	s := l.segments[i]
	off := pos - s.first
	zero, err := zeroFrom(s, off)
	if err != nil {
		return 0, err
	}
	last := i == len(l.segments)-1
	if zero && last {
		// The unwritten rest of a spare: the frames end here.
		s.size = off
		return 0, nil
	}
	damage := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("%w: no whole frame at log position %d (segment %s, offset %d), where the frame for entry %d begins, and it is damage, not a write a crash cut short: %s; nothing was truncated",
			ledger.ErrCorrupt, pos, segmentName(s.first), off, next, fmt.Sprintf(format, args...))
	}
	switch {
	case !last:
		return damage("segment %s follows it", segmentName(l.segments[i+1].first))
	case pos < ack.indexEnd:
		return damage("the index records frames up to log position %d", ack.indexEnd)
	case next < ack.signed:
		return damage("a signed checkpoint covers %d entries", ack.signed)
	}
	var header [frameHeaderSize]byte
	if s.size-off < frameHeaderSize {
		// The file ends within the header.
		return l.erase(s, off, s.size)
	}
	if _, err := s.f.ReadAt(header[:], off); err != nil {
		return 0, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
	}
	n := int64(binary.BigEndian.Uint32(header[:]))
	if n == 0 || n > maxFramePayload {
		return damage("its header gives no length a frame can have, and bytes after it are written")
	}
	if off%sectorSize <= sectorSize-frameHeaderSize-8 && s.size-off >= frameHeaderSize+8 {
		// The length and the first index are in one sector, written
		// together or not at all.
		var start [8]byte
		if _, err := s.f.ReadAt(start[:], off+frameHeaderSize); err != nil {
			return 0, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
		}
		if got := binary.BigEndian.Uint64(start[:]); got != next {
			return damage("its header says it starts at entry %d", got)
		}
	}
	end := off + frameHeaderSize + n
	if end > s.size {
		// The file ends before the frame: the write stopped.
		return l.erase(s, off, s.size)
	}
	if zero, err := zeroFrom(s, end); err != nil {
		return 0, err
	} else if !zero {
		return damage("bytes after its end at log position %d are written", s.first+end)
	}
	unfinished, err := hasZeroSector(s, off, end)
	if err != nil {
		return 0, err
	}
	if !unfinished {
		return damage("every sector of its %d bytes is written, yet it fails its checksum", end-off)
	}
	return l.erase(s, off, end)
}

// hasZeroSector reports whether the bytes [off, end) of s, cut at sector
// boundaries of the file, hold a whole sector of zeros, or end in a part
// of a sector that is all zeros.
func hasZeroSector(s *segment, off, end int64) (bool, error) {
	buf := make([]byte, sectorSize)
	for at := (off/sectorSize + 1) * sectorSize; at < end; at += sectorSize {
		piece := buf[:min(sectorSize, end-at)]
		if _, err := s.f.ReadAt(piece, at); err != nil {
			return false, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
		}
		if !slices.ContainsFunc(piece, func(b byte) bool { return b != 0 }) {
			return true, nil
		}
	}
	// The first sector holds the header: the frame's first bytes, which
	// a torn write that kept the header wrote.
	return false, nil
}

// erase overwrites the torn frame's bytes [off, end) in s, the end of
// the frames, with zeros, durably, and returns how many it overwrote. It
// keeps the file's length, so a spare's zeros stay written ahead.
func (l *frameLog) erase(s *segment, off, end int64) (int64, error) {
	if _, err := s.f.WriteAt(make([]byte, end-off), off); err != nil {
		return 0, fmt.Errorf("ledger: erasing a torn frame: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return 0, fmt.Errorf("ledger: erasing a torn frame: %w", err)
	}
	s.size = off
	return end - off, nil
}

// zeroFrom reports whether s's file holds only zero bytes from off on.
func zeroFrom(s *segment, off int64) (bool, error) {
	buf := make([]byte, 1<<20)
	for off < s.size {
		n, err := s.f.ReadAt(buf[:min(int64(len(buf)), s.size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("ledger: reading segment %s: %w", segmentName(s.first), err)
		}
		if slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			return false, nil
		}
		if n == 0 {
			break
		}
		off += int64(n)
	}
	return true, nil
}

func (l *frameLog) close() error {
	l.spareMu.Lock()
	l.closing = true
	l.spareMu.Unlock()
	l.prepared.Wait()
	if spare := l.takeSpare(); spare != nil {
		spare.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, s := range l.segments {
		errs = append(errs, s.f.Close())
	}
	l.segments = nil
	return errors.Join(errs...)
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
