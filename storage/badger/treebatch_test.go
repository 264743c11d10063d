package badger_test

import (
	"crypto/sha256"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// treeBatch is testBatch with the tiles a ledger's batch carries for a
// tree of fewer than 65,536 entries: the level-0 tiles its entries are
// in and, when it fills level-0 tiles, the level-1 tile holding their
// roots, each whole.
func treeBatch(start uint64, n int) ledger.Batch {
	b := testBatch(start, n)
	end := start + uint64(n)
	before, after := start/ledger.TileWidth, end/ledger.TileWidth // full level-0 tiles
	for t := before / ledger.TileWidth; after > before && t*ledger.TileWidth < after; t++ {
		var hashes []byte
		for full := t * ledger.TileWidth; full < min(after, (t+1)*ledger.TileWidth); full++ {
			root := tileRoot(full)
			hashes = append(hashes, root[:]...)
		}
		b.Tiles = append(b.Tiles, ledger.Tile{Level: 1, Index: t, Hashes: hashes})
	}
	return b
}

// treeTile returns tile level/index (level 0 or 1) of the tree of size
// entries of testEntry, or nil if the tree has none of it.
func treeTile(size uint64, level uint8, index uint64) []byte {
	var hashes []byte
	for i := index * ledger.TileWidth; i < (index+1)*ledger.TileWidth; i++ {
		switch {
		case level == 0 && i < size:
			h := leafHash(testEntry(i))
			hashes = append(hashes, h[:]...)
		case level == 1 && i < size/ledger.TileWidth:
			h := tileRoot(i)
			hashes = append(hashes, h[:]...)
		}
	}
	return hashes
}

var tileRoots sync.Map // uint64 → [32]byte

// tileRoot returns the root of full level-0 tile index of testEntry's
// tree: the RFC 6962 hash of its 256 leaves.
func tileRoot(index uint64) [ledger.HashSize]byte {
	if h, ok := tileRoots.Load(index); ok {
		return h.([ledger.HashSize]byte)
	}
	level := make([][ledger.HashSize]byte, ledger.TileWidth)
	for i := range level {
		level[i] = leafHash(testEntry(index*ledger.TileWidth + uint64(i)))
	}
	for len(level) > 1 {
		for i := range len(level) / 2 {
			level[i] = sha256.Sum256(append(append([]byte{1}, level[2*i][:]...), level[2*i+1][:]...))
		}
		level = level[:len(level)/2]
	}
	tileRoots.Store(index, level[0])
	return level[0]
}
