package main

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/decisionledger/ledger/internal/tlogtiles"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// A reader of a log's C2SP tlog-tiles (docs/log.md §2, docs/api.md): the
// hashes of any node of a tree whose size a checkpoint gives, and its
// entry bundles. Nothing read here is trusted: every hash ends in a root
// compared with a signed checkpoint's (a consistency proof, or a range of
// verified entries).
//
// github.com/transparency-dev/merkle builds the proofs (which nodes, and
// how to rehash them); reading a node from tiles is written here because
// that module reads no tiles, and golang.org/x/mod/sumdb/tlog's
// TileHashReader wants sumdb's tile paths (with the height in them) and
// authenticates every tile against the root as it reads, which the
// proofs below do anyway.

const (
	tileHeight = tlogtiles.Height
	tileWidth  = tlogtiles.Width
	hashSize   = 32
)

var tileHasher = rfc6962.DefaultHasher

// tilePath is the URL path of tile (level, index) of width w (level -1:
// the entry bundle).
func tilePath(level int, index uint64, w int) string {
	return "/" + tlogtiles.Path(level, index, w)
}

// tileReader reads the tiles of the tree of one size, each at most once.
type tileReader struct {
	f     *fetcher
	size  uint64
	tiles map[string][]byte
}

func newTileReader(f *fetcher, size uint64) *tileReader {
	return &tileReader{f: f, size: size, tiles: map[string][]byte{}}
}

// tileWidthAt is the width of tile (level, index) in the tree: how many
// of its hashes the tree has.
func (r *tileReader) tileWidthAt(level uint, index uint64) int {
	have := r.size >> (tileHeight * level)
	if have >= (index+1)*tileWidth {
		return tileWidth
	}
	return int(have - index*tileWidth)
}

// tile returns the hashes of tile (level, index) in the tree.
func (r *tileReader) tile(ctx context.Context, level uint, index uint64) ([]byte, error) {
	w := r.tileWidthAt(level, index)
	path := tilePath(int(level), index, w)
	if t, ok := r.tiles[path]; ok {
		return t, nil
	}
	t, err := r.f.get(ctx, path, tileWidth*hashSize)
	if err != nil {
		return nil, err
	}
	if len(t) != w*hashSize {
		return nil, &tileError{path: path, err: fmt.Errorf("%d bytes, want %d (%d hashes)", len(t), w*hashSize, w)}
	}
	r.tiles[path] = t
	return t, nil
}

// tileError: a tile or entry bundle the log served is malformed.
type tileError struct {
	path string
	err  error
}

func (e *tileError) Error() string { return fmt.Sprintf("tile %s: %v", e.path, e.err) }

// node returns the hash of a node of the tree: read from the tile of its
// level, or computed from the (at most 128) hashes under it in the tile
// below.
func (r *tileReader) node(ctx context.Context, id compact.NodeID) ([]byte, error) {
	tl, k := id.Level/tileHeight, id.Level%tileHeight
	first := id.Index << k // the first hash under it at level tl·8
	t, err := r.tile(ctx, tl, first/tileWidth)
	if err != nil {
		return nil, err
	}
	off, n := first%tileWidth, uint64(1)<<k
	if (off+n)*hashSize > uint64(len(t)) {
		return nil, fmt.Errorf("node %d/%d is not complete in the tree of size %d", id.Level, id.Index, r.size)
	}
	hs := make([][]byte, n)
	for i := range hs {
		hs[i] = t[(off+uint64(i))*hashSize : (off+uint64(i)+1)*hashSize]
	}
	for len(hs) > 1 {
		next := make([][]byte, len(hs)/2)
		for i := range next {
			next[i] = tileHasher.HashChildren(hs[2*i], hs[2*i+1])
		}
		hs = next
	}
	return hs[0], nil
}

func (r *tileReader) nodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	hs := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := r.node(ctx, id)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}

// consistencyProof builds the RFC 6962 proof that the tree of size1 is a
// prefix of this one.
func (r *tileReader) consistencyProof(ctx context.Context, size1 uint64) ([][]byte, error) {
	ns, err := proof.Consistency(size1, r.size)
	if err != nil {
		return nil, err
	}
	hs, err := r.nodes(ctx, ns.IDs)
	if err != nil {
		return nil, err
	}
	return ns.Rehash(hs, tileHasher.HashChildren)
}

// compactRange returns the hashes of the compact range [begin, end), as
// compact.RangeNodes lists them (what verify.Range.Finish takes).
func (r *tileReader) compactRange(ctx context.Context, begin, end uint64) ([][]byte, error) {
	return r.nodes(ctx, compact.RangeNodes(begin, end, nil))
}

// entries calls fn with each entry [begin, end) of the tree, in order,
// from the entry bundles.
func (r *tileReader) entries(ctx context.Context, begin, end uint64, fn func(index uint64, e []byte) error) error {
	for n := begin / tileWidth; n*tileWidth < end; n++ {
		w := r.tileWidthAt(0, n)
		path := tilePath(-1, n, w)
		b, err := r.f.get(ctx, path, int64(w)*(2+0xffff))
		if err != nil {
			return err
		}
		for i := range uint64(w) {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				return &tileError{path: path, err: fmt.Errorf("ends inside entry %d of %d", i, w)}
			}
			l := int(binary.BigEndian.Uint16(b))
			e := b[2 : 2+l]
			b = b[2+l:]
			if index := n*tileWidth + i; index >= begin && index < end {
				if err := fn(index, e); err != nil {
					return err
				}
			}
		}
		if len(b) != 0 {
			return &tileError{path: path, err: fmt.Errorf("%d bytes after its %d entries", len(b), w)}
		}
	}
	return nil
}
