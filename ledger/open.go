package ledger

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/decisionledger/ledger/entry"
)

// openRecent is Open's default check, whose cost does not grow with the
// log: the right edge of the tree at the latest checkpoint is read from
// the stored tiles and must give the checkpoint's signed root; then every
// entry after the checkpoint, which no signature covers yet, is rehashed
// onto that edge and each tile it changes compared with the stored one;
// the edge so built must be the one the stored tiles give at size, tile
// for tile. The entries the checkpoint covers are vouched for by its
// signature through the stored tiles: a changed entry among them is found
// when it is read (a proof, an export, a verifier) or by a full check
// (Options.FullCheck, fsck), not here.
func (l *Ledger) openRecent(ctx context.Context, size uint64) error {
	r := newTileReader(ctx, l.store)
	// The stored tiles may hold more hashes than the tree at the
	// checkpoint: those of the entries after it, checked below.
	e, err := r.edgeAt(l.cpSize, true)
	if err != nil {
		return fmt.Errorf("ledger: rebuilding the tree edge at checkpoint size %d: %w", l.cpSize, err)
	}
	if l.cp != nil {
		if root := e.root(); !bytes.Equal(root, l.cpRoot) {
			return fmt.Errorf("%w: stored tiles give root %x at size %d, the signed checkpoint says %x", ErrCorrupt, root, l.cpSize, l.cpRoot)
		}
	}
	if err := l.rehash(ctx, e, size); err != nil {
		return err
	}
	stored, err := r.edgeAt(size, false)
	if err != nil {
		return fmt.Errorf("ledger: rebuilding the tree edge: %w", err)
	}
	if !sameEdge(e, stored) {
		return fmt.Errorf("%w: the stored tiles at tree size %d do not match the tree rebuilt from the checkpoint and the entries after it", ErrCorrupt, size)
	}
	l.edge = e
	return nil
}

// rehash appends the leaf hashes of the stored entries [e.size(), size) to
// e, comparing every tile they change with the stored tile: the stored
// one must begin with the rebuilt hashes, and be no longer once the last
// entry is in.
func (l *Ledger) rehash(ctx context.Context, e *edge, size uint64) error {
	const chunk = 4096
	var leafHashes [][HashSize]byte
	for e.size() < size {
		start := e.size()
		end := min(size, start+chunk)
		leafHashes = leafHashes[:0]
		err := l.store.ReadEntries(ctx, start, end, func(_ uint64, b []byte) error {
			leafHashes = append(leafHashes, entry.LeafHash(b))
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: reading entries: %w", err)
		}
		tiles, err := e.appendLeaves(leafHashes)
		if err != nil {
			return err
		}
		for _, t := range tiles {
			stored, err := l.store.Tile(ctx, t.Level, t.Index)
			if err != nil {
				return fmt.Errorf("%w: tile %d/%d: %w", ErrCorrupt, t.Level, t.Index, err)
			}
			if !bytes.HasPrefix(stored, t.Hashes) {
				return fmt.Errorf("%w: stored tile %d/%d does not match entries %d to %d", ErrCorrupt, t.Level, t.Index, start, end-1)
			}
			if end == size && len(stored) != len(t.Hashes) {
				return fmt.Errorf("%w: stored tile %d/%d is longer than the tree", ErrCorrupt, t.Level, t.Index)
			}
		}
	}
	return nil
}

// sameEdge reports whether two edges of one size have the same compact
// range and the same partial tiles. A full tile is not on the edge: an
// edge grown by appendLeaves keeps the tile it just filled until the next
// one starts, one read from tiles (edgeAt) has none.
func sameEdge(a, b *edge) bool {
	if a.size() != b.size() || !slices.EqualFunc(a.rng.Hashes(), b.rng.Hashes(), bytes.Equal) {
		return false
	}
	partial := func(e *edge) map[uint8][]byte {
		m := map[uint8][]byte{}
		for level, t := range e.tiles {
			if len(t) < TileWidth*HashSize {
				m[level] = t
			}
		}
		return m
	}
	return maps.EqualFunc(partial(a), partial(b), bytes.Equal)
}
