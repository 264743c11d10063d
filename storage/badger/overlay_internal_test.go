package badger

import (
	"bytes"
	"testing"

	"github.com/decisionledger/ledger/ledger"
)

// A flush writes, with the tiles mark, every tile version the overlay
// holds, full ones too: a frame after the mark's that filled a tile has
// replaced, in the overlay, the partial version of the frame at the
// mark, and a reopen that replays the frames after the mark rebuilds
// that tile from what the store held at the mark.
func TestOverlayPendingTilesHoldFullVersions(t *testing.T) {
	o := newOverlay(0)
	partial := bytes.Repeat([]byte{1}, 200*ledger.HashSize)
	full := bytes.Repeat([]byte{1}, tileBytes)
	leaves := func(n int) [][ledger.HashSize]byte { return make([][ledger.HashSize]byte, n) }
	o.add(ledger.Batch{Start: 0, LeafHashes: leaves(200), Tiles: []ledger.Tile{{Level: 0, Index: 0, Hashes: partial}}}, 0, 10, make([]entryLocation, 200))
	o.add(ledger.Batch{Start: 200, LeafHashes: leaves(56), Tiles: []ledger.Tile{{Level: 0, Index: 0, Hashes: full}}}, 10, 20, make([]entryLocation, 56))
	// The indexer flushes at the first frame, the second still pending.
	tiles := o.pendingTiles()
	if len(tiles) != 1 || !bytes.Equal(tiles[0].Hashes, full) {
		t.Fatalf("pendingTiles = %d tiles; want tile 0/0 as the second frame left it, full", len(tiles))
	}
}
