package badger

import (
	"bytes"
	"slices"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// The overlay holds the frames a Store has made durable but badger
// has not indexed yet. Commit returns once its frame is synced; an
// indexer goroutine writes badger's index behind it, so that a commit's
// latency is one write and one fdatasync. Until a frame is indexed, reads
// find its entries, leaf hashes, keys and tiles here. A frame leaves the
// overlay only after its index is committed to badger (and its leaf
// hashes and keys are in the windows beside it, window.go), so every read finds
// everything committed in one place or the other; readers look here first.

// maxPendingFrames bounds the frames waiting for the indexer: a Commit
// beyond it waits, so memory stays bounded if badger falls behind.
const maxPendingFrames = 64

type pendingFrame struct {
	batch ledger.Batch    // Start, LeafHashes, Keys and Tiles, copied; no entry bytes
	locs  []entryLocation // absolute log positions
	pos   int64
	end   int64
}

func (f *pendingFrame) contains(index uint64) bool {
	return index >= f.batch.Start && index < f.batch.Start+uint64(len(f.locs))
}

type overlayTile struct {
	hashes []byte
	start  uint64 // the frame that wrote this version
}

// tileID names a tile: its level and its index within the level.
type tileID struct {
	level uint8
	index uint64
}

type overlay struct {
	mu     sync.RWMutex
	cond   *sync.Cond // on mu: frames added or indexed, or stopping
	size   uint64     // durable entries, indexed or not
	frames []*pendingFrame
	keys   map[string]uint64
	leaves map[[ledger.HashSize]byte]uint64
	tiles  map[tileID]overlayTile
	failed error // the indexer failed: nothing more is indexed
	stop   bool
}

func newOverlay(size uint64) *overlay {
	o := &overlay{size: size, keys: map[string]uint64{}, leaves: map[[ledger.HashSize]byte]uint64{}, tiles: map[tileID]overlayTile{}}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// add records a durable frame for b, waiting first while too many frames
// wait for the indexer, unless the store is closing (the indexer may have
// stopped for want of space). It copies what it keeps.
func (o *overlay) add(b ledger.Batch, pos, end int64, locs []entryLocation) {
	f := &pendingFrame{
		batch: ledger.Batch{Start: b.Start, LeafHashes: slices.Clone(b.LeafHashes)},
		locs:  make([]entryLocation, len(locs)),
		pos:   pos, end: end,
	}
	for i, l := range locs {
		l.pos += pos
		f.locs[i] = l
	}
	if len(b.Keys) > 0 {
		f.batch.Keys = make([][]byte, len(b.Keys))
		for i, k := range b.Keys {
			f.batch.Keys[i] = bytes.Clone(k)
		}
	}
	for _, t := range b.Tiles {
		f.batch.Tiles = append(f.batch.Tiles, ledger.Tile{Level: t.Level, Index: t.Index, Hashes: bytes.Clone(t.Hashes)})
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.frames) >= maxPendingFrames && o.failed == nil && !o.stop {
		o.cond.Wait()
	}
	o.frames = append(o.frames, f)
	for i, h := range f.batch.LeafHashes {
		if _, ok := o.leaves[h]; !ok {
			o.leaves[h] = f.batch.Start + uint64(i)
		}
	}
	for i, k := range f.batch.Keys {
		if len(k) > 0 {
			o.keys[string(k)] = f.batch.Start + uint64(i)
		}
	}
	for _, t := range f.batch.Tiles {
		o.tiles[tileID{t.Level, t.Index}] = overlayTile{hashes: t.Hashes, start: f.batch.Start}
	}
	o.size = f.batch.Start + uint64(len(f.locs))
	o.cond.Broadcast()
}

// next waits for the oldest frame not yet indexed; nil once stopping and
// nothing is left.
func (o *overlay) next() *pendingFrame {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.frames) == 0 && !o.stop {
		o.cond.Wait()
	}
	if len(o.frames) == 0 {
		return nil
	}
	return o.frames[0]
}

// indexed drops the oldest frame, which badger now holds. Its partial
// tiles stay until a flush (tilesWritten) has written them.
func (o *overlay) indexed(f *pendingFrame, tilesWritten bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.frames = o.frames[1:]
	for _, h := range f.batch.LeafHashes {
		if i, ok := o.leaves[h]; ok && f.contains(i) {
			delete(o.leaves, h)
		}
	}
	for _, k := range f.batch.Keys {
		if i, ok := o.keys[string(k)]; ok && len(k) > 0 && f.contains(i) {
			delete(o.keys, string(k))
		}
	}
	for id, v := range o.tiles {
		// Versions of this frame or earlier ones that badger now holds:
		// full ones always, partial ones after a flush.
		if v.start <= f.batch.Start && (tilesWritten || len(v.hashes) == ledger.TileWidth*ledger.HashSize) {
			delete(o.tiles, id)
		}
	}
	o.cond.Broadcast()
}

// pendingTiles returns the tile versions the overlay holds: the partial
// ones of the frames indexed since the last flush, and the latest version
// of every tile a frame not yet indexed wrote, partial or full. A flush
// writes them all, so that with the tiles mark the store holds a version
// of every tile at least as recent as the mark's frame: a full version in
// the overlay has replaced the partial one of an earlier frame, which a
// reopen replaying the frames after the mark needs (Store.replayTiles).
func (o *overlay) pendingTiles() []ledger.Tile {
	o.mu.RLock()
	defer o.mu.RUnlock()
	ts := make([]ledger.Tile, 0, len(o.tiles))
	for id, v := range o.tiles {
		ts = append(ts, ledger.Tile{Level: id.level, Index: id.index, Hashes: v.hashes})
	}
	return ts
}

// fail records that the indexer stopped, and wakes waiting commits.
func (o *overlay) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed = err
	o.cond.Broadcast()
}

// location returns where entry index is if its frame is pending.
func (o *overlay) location(index uint64) (entryLocation, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, f := range o.frames {
		if f.contains(index) {
			return f.locs[index-f.batch.Start], true
		}
	}
	return entryLocation{}, false
}

// snapshot returns the durable size and the pending frames now.
func (o *overlay) snapshot() (uint64, []*pendingFrame) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.size, slices.Clone(o.frames)
}

func (o *overlay) durableSize() uint64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.size
}

func (o *overlay) leafIndex(h [ledger.HashSize]byte) (uint64, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	i, ok := o.leaves[h]
	return i, ok
}

func (o *overlay) keyIndex(k []byte) (uint64, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	i, ok := o.keys[string(k)]
	return i, ok
}

func (o *overlay) tile(level uint8, index uint64) ([]byte, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	t, ok := o.tiles[tileID{level, index}]
	return bytes.Clone(t.hashes), ok
}
