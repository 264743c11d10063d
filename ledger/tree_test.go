package ledger

import (
	"bytes"
	"crypto/sha256"
	"runtime"
	"slices"
	"testing"
)

// appendLeaves must not keep references into its argument: openFull
// reuses one buffer for every chunk of leaf hashes.
func TestAppendLeavesCopiesHashes(t *testing.T) {
	a, b := newEdge(), newEdge()
	buf := make([][HashSize]byte, 3)
	var all [][HashSize]byte
	for round := range 5 {
		for i := range buf {
			buf[i] = sha256.Sum256([]byte{byte(round), byte(i)})
		}
		all = append(all, buf...)
		if _, err := a.appendLeaves(buf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.appendLeaves(all); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.root(), b.root()) {
		t.Fatal("root depends on how the leaf hashes were buffered")
	}
}

// leafHashes returns n leaf hashes, distinct for each seed.
func leafHashes(seed byte, n int) [][HashSize]byte {
	hs := make([][HashSize]byte, n)
	for i := range hs {
		hs[i] = sha256.Sum256([]byte{seed, byte(i), byte(i >> 8)})
	}
	return hs
}

// Clones of one edge share its tiles' bytes: two clones extended with
// different leaves (a batch whose commit failed, then the next) each
// return the tiles of their own tree, and neither changes the parent's
// tiles nor the tiles of the batch that made it, which a store may keep.
// Batches start and end inside tiles and cross the level 0 tile boundary.
func TestEdgeClonesShareTiles(t *testing.T) {
	tilesOf := func(hs [][HashSize]byte) map[tileID][]byte {
		e := newEdge()
		tiles, err := e.appendLeaves(hs)
		if err != nil {
			t.Fatal(err)
		}
		m := map[tileID][]byte{}
		for _, tile := range tiles {
			m[tileID{tile.Level, tile.Index}] = tile.Hashes
		}
		return m
	}
	for _, size := range []int{1, 250, 255, 256, 300, 65535} {
		parent := newEdge()
		first := leafHashes(0, size)
		made, err := parent.appendLeaves(first)
		if err != nil {
			t.Fatal(err)
		}
		keep := make([][]byte, len(made))
		for i, tile := range made {
			keep[i] = bytes.Clone(tile.Hashes)
		}
		parentTiles := map[uint8][]byte{}
		for l, tile := range parent.tiles {
			parentTiles[l] = bytes.Clone(tile)
		}
		// Every clone extended first, then each checked: a clone writing
		// where another wrote would show.
		type extended struct {
			n     int
			clone *edge
			tiles []Tile
			want  [][HashSize]byte
		}
		var all []extended
		for seed, n := range []int{3, 20, 300} {
			next := append(append([][HashSize]byte{}, first...), leafHashes(byte(seed+1), n)...)
			c := parent.clone()
			tiles, err := c.appendLeaves(next[size:])
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, extended{n, c, tiles, next})
		}
		for _, x := range all {
			want := tilesOf(x.want)
			for _, tile := range x.tiles {
				if w := want[tileID{tile.Level, tile.Index}]; !bytes.Equal(tile.Hashes, w) {
					t.Fatalf("size %d + %d: tile %d/%d differs from the tree built at once", size, x.n, tile.Level, tile.Index)
				}
			}
			e := newEdge()
			if _, err := e.appendLeaves(x.want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.clone.root(), e.root()) || !sameEdge(x.clone, e) {
				t.Fatalf("size %d + %d: the clone's edge differs from the tree built at once", size, x.n)
			}
		}
		for i, tile := range made {
			if !bytes.Equal(tile.Hashes, keep[i]) {
				t.Errorf("size %d: a clone's batch changed tile %d/%d of the batch before", size, tile.Level, tile.Index)
			}
		}
		for l, tile := range parent.tiles {
			if !bytes.Equal(tile, parentTiles[l]) {
				t.Errorf("size %d: a clone's batch changed the parent's tile at level %d", size, l)
			}
		}
	}
}

// A batch copies each partial tile it extends once, into room for all it
// adds: extending a clone allocates, beyond what its compact range does,
// little more than one copy of the tiles it changes (not a copy in the
// clone, a larger one as they grow, and one more for the batch).
func TestAppendLeavesCopiesTilesOnce(t *testing.T) {
	parent := newEdge()
	if _, err := parent.appendLeaves(leafHashes(0, 1000)); err != nil {
		t.Fatal(err)
	}
	batch := leafHashes(1, 16)
	rangeOnly := bytesPerRun(t, func() {
		rng, err := rangeFactory.NewRange(0, parent.rng.End(), slices.Clone(parent.rng.Hashes()))
		if err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			h := batch[i]
			if err := rng.Append(h[:], nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	var changed int
	extend := bytesPerRun(t, func() {
		tiles, err := parent.clone().appendLeaves(batch)
		if err != nil {
			t.Fatal(err)
		}
		changed = 0
		for _, tile := range tiles {
			changed += len(tile.Hashes)
		}
	})
	// 1000 + 16 leaves: the tile at level 0 changes, to 248 hashes
	// (7,936 bytes); the rest is maps, lists and rounding to the
	// allocator's size classes. Copying it in the clone, growing it and
	// copying it for the batch took more than twice as much.
	if tiles := extend - rangeOnly; tiles > changed+2048 {
		t.Errorf("extending a clone by 16 leaves allocates %d bytes for its tiles, want at most their %d and 2,048 (the range alone %d)", tiles, changed, rangeOnly)
	}
}

// bytesPerRun returns the bytes f allocates, on average over 50 runs.
func bytesPerRun(t *testing.T, f func()) int {
	t.Helper()
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 50 {
		f()
	}
	runtime.ReadMemStats(&after)
	return int(after.TotalAlloc-before.TotalAlloc) / 50
}
