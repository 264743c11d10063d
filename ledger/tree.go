package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sync"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The Merkle tree is RFC 6962's, built with compact ranges. Node hashes
// are persisted as tiles in the C2SP tlog-tiles layout: the tile at
// (L, N) holds the hashes of tree level 8·L with indices 256·N to
// 256·N+255, so level 0 tiles hold the leaf hashes. Every other node hash
// is recomputed from the tile below it, as sumdb/tlog and tessera do. A
// tile grows from partial to full as the log grows; the hashes already in
// it never change, so a shorter (older) version of a tile is a prefix of
// the stored one.

var hasher = rfc6962.DefaultHasher

var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// hashChildren is RFC 6962's interior node hash, SHA-256(0x01 || l || r),
// as rfc6962.Hasher.HashChildren computes it but without its new hash
// state per node: a proof at a random index recomputes up to a few
// hundred nodes from the tiles, and the allocations were most of it.
func hashChildren(l, r []byte) []byte {
	h := hashChildrenArray(l, r)
	return h[:]
}

func hashChildrenArray(l, r []byte) [HashSize]byte {
	var buf [1 + 2*HashSize]byte
	buf[0] = rfc6962.RFC6962NodeHashPrefix
	copy(buf[1:], l)
	copy(buf[1+HashSize:], r)
	return sha256.Sum256(buf[:])
}

// edge is the right edge of the tree: the compact range [0, size) and the
// partial tile at each tile level, which the next batch extends. The
// tiles' bytes are never written once a batch has extended them: clones
// share them, and so do the batch's Tiles, which the store may keep;
// appendLeaves extends a copy.
type edge struct {
	rng   *compact.Range
	tiles map[uint8][]byte // tile level -> hashes of its rightmost tile (never full)
}

func newEdge() *edge {
	return &edge{rng: rangeFactory.NewEmptyRange(0), tiles: map[uint8][]byte{}}
}

func (e *edge) size() uint64 { return e.rng.End() }

func (e *edge) clone() *edge {
	hashes := e.rng.Hashes()
	copied := make([][]byte, len(hashes))
	copy(copied, hashes)
	rng, err := rangeFactory.NewRange(0, e.rng.End(), copied)
	if err != nil {
		panic(err) // the hashes came from a valid range
	}
	// The tiles are shared, not copied: appendLeaves copies a tile before
	// it extends it.
	return &edge{rng: rng, tiles: maps.Clone(e.tiles)}
}

// appendLeaves appends leaf hashes to e (a clone the caller may discard)
// and returns every tile they changed, in its new version, which shares
// its bytes with e.
func (e *edge) appendLeaves(leafHashes [][HashSize]byte) ([]Tile, error) {
	changed := map[tileID][]byte{}
	// Each tile is extended in a copy of its own, made at its first
	// extension with room for all the hashes the batch adds to it (its
	// bytes are shared with the edge e was cloned from and the batch
	// before), so that it is copied once a batch and never grown.
	var own [64 / TileHeight]bool
	var visitErr error
	visit := func(id compact.NodeID, hash []byte) {
		if id.Level%TileHeight != 0 || visitErr != nil {
			return
		}
		level := uint8(id.Level / TileHeight)
		key := tileID{level, id.Index / TileWidth}
		pos := id.Index % TileWidth
		t := e.tiles[level]
		if pos == 0 {
			t = nil // a new tile starts; the one before it is full
		}
		if uint64(len(t)) != pos*HashSize {
			visitErr = fmt.Errorf("%w: tile %d/%d holds %d bytes where node %d goes", ErrCorrupt, level, key.index, len(t), id.Index)
			return
		}
		if pos == 0 || !own[level] {
			// At most one node at this level for each 256^level leaves,
			// and one more for where they begin.
			room := (len(leafHashes)>>(TileHeight*uint(level)) + 1) * HashSize
			t = append(make([]byte, 0, min(len(t)+room, TileWidth*HashSize)), t...)
			own[level] = true
		}
		t = append(t, hash...)
		e.tiles[level] = t
		changed[key] = t
	}
	for i := range leafHashes {
		// The range keeps the slice it is given: pass a copy, never a
		// window into the caller's array, which the caller may reuse.
		h := leafHashes[i]
		if err := e.rng.Append(h[:], visit); err != nil {
			return nil, err
		}
		if visitErr != nil {
			return nil, visitErr
		}
	}
	tiles := make([]Tile, 0, len(changed))
	for key, t := range changed {
		// Capped, so that a store's append to it never writes into the
		// room of the edge's copy.
		tiles = append(tiles, Tile{Level: key.level, Index: key.index, Hashes: t[:len(t):len(t)]})
	}
	return tiles, nil
}

func (e *edge) root() []byte {
	if e.size() == 0 {
		return hasher.EmptyRoot()
	}
	root, err := e.rng.GetRootHash(nil)
	if err != nil {
		panic(err) // a non-empty range starting at 0 always has a root
	}
	return root
}

type tileID struct {
	level uint8
	index uint64
}

// tileReader reads node hashes from stored tiles, caching the tiles it has
// read. One tileReader serves one proof or one open.
type tileReader struct {
	ctx   context.Context
	store Store
	cache map[tileID][]byte
	// subtrees, if set, keeps the interior nodes of the tiles above
	// level 0 between readers (the ledger's proofs).
	subtrees *subtreeCache
}

// subtreeCache keeps, for tiles above level 0, the hashes of every
// complete subtree within the tile: a proof at a random index recomputes
// up to 247 node hashes from each tile on its path, and above level 0
// there are few tiles (one per 65,536 entries), which every proof
// crosses. A tile's first w hashes never change, so the subtrees of a
// tile read with w hashes are kept under its width. Level-0 tiles, one
// per 256 entries, would only churn it. At most subtreeCacheTiles, about
// 2 MiB: one is dropped, whichever, to make room.
type subtreeCache struct {
	mu    sync.Mutex
	trees map[subtreeKey][]byte
}

type subtreeKey struct {
	tile  tileID
	width uint64
}

const subtreeCacheTiles = 256

func newSubtreeCache() *subtreeCache {
	return &subtreeCache{trees: map[subtreeKey][]byte{}}
}

// subtrees returns the subtree hashes of tile t at id, tree level by tree
// level above the tile's own (w/2 hashes, then w/4, … for a tile of w),
// computing them once.
func (c *subtreeCache) subtrees(id tileID, t []byte) []byte {
	key := subtreeKey{id, uint64(len(t)) / HashSize}
	c.mu.Lock()
	tree, ok := c.trees[key]
	c.mu.Unlock()
	if ok {
		return tree
	}
	tree = make([]byte, 0, key.width*HashSize)
	below := t
	for n := key.width / 2; n > 0; n /= 2 {
		start := len(tree)
		for i := range n {
			h := hashChildrenArray(below[2*i*HashSize:(2*i+1)*HashSize], below[(2*i+1)*HashSize:(2*i+2)*HashSize])
			tree = append(tree, h[:]...)
		}
		below = tree[start:]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.trees) >= subtreeCacheTiles {
		for k := range c.trees {
			delete(c.trees, k)
			break
		}
	}
	c.trees[key] = tree
	return tree
}

// subtreeAt returns the hash of the complete subtree span levels above
// the tile's, whose first hash in the tile is at pos, from tree (as
// subtreeCache.subtrees returns it for a tile of width hashes).
func subtreeAt(tree []byte, width, span, pos uint64) []byte {
	var off uint64
	for s := uint64(1); s < span; s++ {
		off += width >> s
	}
	off += pos >> span
	return tree[off*HashSize : (off+1)*HashSize : (off+1)*HashSize]
}

func newTileReader(ctx context.Context, s Store) *tileReader {
	return &tileReader{ctx: ctx, store: s, cache: map[tileID][]byte{}}
}

// proofReader is a tileReader for the proofs the ledger serves, with the
// ledger's subtree cache.
func (l *Ledger) proofReader(ctx context.Context) *tileReader {
	r := newTileReader(ctx, l.store)
	r.subtrees = l.subtrees
	return r
}

func (r *tileReader) tile(level uint8, index uint64) ([]byte, error) {
	key := tileID{level, index}
	if t, ok := r.cache[key]; ok {
		return t, nil
	}
	t, err := r.store.Tile(r.ctx, level, index)
	if err != nil {
		return nil, err
	}
	if len(t) == 0 || len(t)%HashSize != 0 || len(t) > TileWidth*HashSize {
		return nil, fmt.Errorf("%w: tile %d/%d has %d bytes", ErrCorrupt, level, index, len(t))
	}
	r.cache[key] = t
	return t, nil
}

// node returns the hash of the perfect subtree node id, which must be
// complete in the stored tree: it reads the tile at the nearest tile level
// at or below id.Level and hashes up from there.
func (r *tileReader) node(id compact.NodeID) ([]byte, error) {
	base := id.Level - id.Level%TileHeight
	span := id.Level - base
	first := id.Index << span
	count := uint64(1) << span
	tileIndex := first / TileWidth
	t, err := r.tile(uint8(base/TileHeight), tileIndex)
	if err != nil {
		return nil, fmt.Errorf("node (%d, %d): %w", id.Level, id.Index, err)
	}
	from, to := (first%TileWidth)*HashSize, (first%TileWidth+count)*HashSize
	if uint64(len(t)) < to {
		return nil, fmt.Errorf("%w: tile %d/%d too short for node (%d, %d)", ErrCorrupt, base/TileHeight, tileIndex, id.Level, id.Index)
	}
	if r.subtrees != nil && base > 0 && span > 0 {
		tree := r.subtrees.subtrees(tileID{uint8(base / TileHeight), tileIndex}, t)
		return subtreeAt(tree, uint64(len(t))/HashSize, uint64(span), first%TileWidth), nil
	}
	// Reduced in place, a level at a time, in one buffer.
	hashes := bytes.Clone(t[from:to])
	for n := count; n > 1; n /= 2 {
		for i := range n / 2 {
			h := hashChildrenArray(hashes[2*i*HashSize:(2*i+1)*HashSize], hashes[(2*i+1)*HashSize:(2*i+2)*HashSize])
			copy(hashes[i*HashSize:], h[:])
		}
	}
	return hashes[:HashSize:HashSize], nil
}

func (r *tileReader) nodes(ids []compact.NodeID) ([][]byte, error) {
	hashes := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := r.node(id)
		if err != nil {
			return nil, err
		}
		hashes[i] = h
	}
	return hashes, nil
}

// edgeAt rebuilds the right edge of the tree of the given size from stored
// tiles. grown says the store may have grown since it held size entries
// (another process sequences: see Follow), so a partial tile may hold more
// hashes than that tree has; its first ones are the tree's, since a tile
// only grows. Otherwise a longer tile is refused.
func (r *tileReader) edgeAt(size uint64, grown bool) (*edge, error) {
	rng, err := r.rangeAt(size)
	if err != nil {
		return nil, err
	}
	e := &edge{rng: rng, tiles: map[uint8][]byte{}}
	for level := uint8(0); size>>(TileHeight*uint(level)) > 0; level++ {
		n := size >> (TileHeight * uint(level)) // nodes at tree level 8·level
		width := n % TileWidth
		if width == 0 {
			continue
		}
		t, err := r.tile(level, n/TileWidth)
		if err != nil {
			return nil, err
		}
		if have := uint64(len(t)); have < width*HashSize || have > width*HashSize && !grown {
			return nil, fmt.Errorf("%w: tile %d/%d holds %d hashes, tree size %d needs %d", ErrCorrupt, level, n/TileWidth, len(t)/HashSize, size, width)
		}
		e.tiles[level] = bytes.Clone(t[:width*HashSize])
	}
	return e, nil
}

// rootAt computes the root hash of the tree of the given size from tiles.
func (r *tileReader) rootAt(size uint64) ([]byte, error) {
	if size == 0 {
		return hasher.EmptyRoot(), nil
	}
	rng, err := r.rangeAt(size)
	if err != nil {
		return nil, err
	}
	return rng.GetRootHash(nil)
}

// rangeAt builds the compact range [0, size) from stored tiles.
func (r *tileReader) rangeAt(size uint64) (*compact.Range, error) {
	hashes, err := r.nodes(compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	return rangeFactory.NewRange(0, size, hashes)
}

// inclusionProof returns the RFC 6962 inclusion proof of leaf index in the
// tree of the given size.
func (r *tileReader) inclusionProof(index, size uint64) ([][]byte, error) {
	return r.proof(proof.Inclusion(index, size))
}

// consistencyProof returns the RFC 6962 consistency proof between the
// trees of sizes size1 <= size2.
func (r *tileReader) consistencyProof(size1, size2 uint64) ([][]byte, error) {
	return r.proof(proof.Consistency(size1, size2))
}

// proof reads the nodes a proof names and combines its ephemeral ones.
func (r *tileReader) proof(nodes proof.Nodes, err error) ([][]byte, error) {
	if err != nil {
		return nil, err
	}
	hashes, err := r.nodes(nodes.IDs)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hashes, hashChildren)
}
