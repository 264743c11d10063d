package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/internal/tlogtiles"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// A reader of a log's C2SP tlog-tiles (docs/log.md §2, docs/api.md): the
// hashes of any node of a tree whose size a checkpoint gives, and its
// entry bundles. Nothing read here is trusted: every hash ends in a root
// compared with a signed checkpoint's (a prefix proof, or a range of
// verified entries), and when one does not, blame names the tile to
// blame.
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
	tiles map[tileKey][]byte
}

// tileKey names a hash tile: its level (0 holds the leaf hashes) and index.
type tileKey struct {
	level uint
	index uint64
}

func newTileReader(f *fetcher, size uint64) *tileReader {
	return &tileReader{f: f, size: size, tiles: map[tileKey][]byte{}}
}

// path is the URL path of a hash tile of the tree.
func (r *tileReader) path(k tileKey) string {
	return tilePath(int(k.level), k.index, r.tileWidthAt(k.level, k.index))
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
	k := tileKey{level, index}
	if t, ok := r.tiles[k]; ok {
		return t, nil
	}
	w, path := r.tileWidthAt(level, index), r.path(k)
	t, err := r.f.get(ctx, path, tileWidth*hashSize)
	if err != nil {
		return nil, err
	}
	if len(t) != w*hashSize {
		return nil, &tileError{path: path, err: fmt.Errorf("%d bytes, want %d (%d hashes)", len(t), w*hashSize, w)}
	}
	r.tiles[k] = t
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
	return subtreeHash(t[off*hashSize : (off+n)*hashSize]), nil
}

// subtreeHash is the root of the complete subtree whose lowest hashes
// (a power of two of them) are t, concatenated.
func subtreeHash(t []byte) []byte {
	hs := make([][]byte, len(t)/hashSize)
	for i := range hs {
		hs[i] = t[i*hashSize : (i+1)*hashSize]
	}
	for len(hs) > 1 {
		next := make([][]byte, len(hs)/2)
		for i := range next {
			next[i] = tileHasher.HashChildren(hs[2*i], hs[2*i+1])
		}
		hs = next
	}
	return hs[0]
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

// blame names, where it can tell, the hash tile that makes the tiles read
// so far disagree with root, the tree's signed root; "" if it cannot. It
// authenticates them top down, as a client of sumdb's tiles does: the
// partial tiles at the tree's right edge together hash to the root, and
// each full tile hashes to a node its parent tile holds. The first tile
// that fails, from the top, is the one it names.
func (r *tileReader) blame(ctx context.Context, root []byte) string {
	// The right edge: at each level, the last tile if it is partial. The
	// compact range [0, size) is made of exactly their hashes.
	verified := map[tileKey]bool{}
	var edge []string
	for level := uint(0); r.size>>(tileHeight*level) > 0; level++ {
		if h := r.size >> (tileHeight * level); h%tileWidth != 0 {
			k := tileKey{level, h / tileWidth}
			verified[k] = true
			edge = append(edge, r.path(k))
		}
	}
	hs, err := r.compactRange(ctx, 0, r.size)
	if err != nil {
		return ""
	}
	got := tileHasher.EmptyRoot()
	if r.size > 0 {
		cr, err := (&compact.RangeFactory{Hash: tileHasher.HashChildren}).NewRange(0, r.size, hs)
		if err == nil {
			got, err = cr.GetRootHash(nil)
		}
		if err != nil {
			return ""
		}
	}
	if !bytes.Equal(got, root) {
		return fmt.Sprintf("the partial tiles at the tree's right edge (%s) do not hash to its signed root: one of them is damaged, stale, or of another tree", strings.Join(edge, ", "))
	}
	var auth func(k tileKey) (string, error)
	auth = func(k tileKey) (string, error) {
		if verified[k] {
			return "", nil
		}
		parent := tileKey{k.level + 1, k.index / tileWidth}
		if b, err := auth(parent); b != "" || err != nil {
			return b, err
		}
		pt, err := r.tile(ctx, parent.level, parent.index)
		if err != nil {
			return "", err
		}
		t, err := r.tile(ctx, k.level, k.index)
		if err != nil {
			return "", err
		}
		at := (k.index % tileWidth) * hashSize
		if !bytes.Equal(subtreeHash(t), pt[at:at+hashSize]) {
			return fmt.Sprintf("tile %s does not hash to node %d/%d, which tile %s holds (and that one agrees with the signed root): it is damaged, stale, or of another tree", r.path(k), tileHeight*parent.level, k.index, r.path(parent)), nil
		}
		verified[k] = true
		return "", nil
	}
	keys := slices.Collect(maps.Keys(r.tiles))
	slices.SortFunc(keys, func(a, b tileKey) int {
		return cmp.Or(cmp.Compare(b.level, a.level), cmp.Compare(a.index, b.index))
	})
	for _, k := range keys {
		if b, err := auth(k); b != "" || err != nil {
			return b
		}
	}
	return ""
}
