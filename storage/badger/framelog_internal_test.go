package badger

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/decisionledger/ledger/ledger"
)

// fuzzBatch returns a batch of n entries at start whose level-0 tiles
// hold its leaf hashes after the hashes before start (made up: a frame
// does not hold them), and a level-1 tile of width w+1 at its width w in
// the tree of start entries.
func fuzzBatch(start uint64, n int) ledger.Batch {
	b := ledger.Batch{Start: start}
	for i := range n {
		e := binary.BigEndian.AppendUint64(nil, start+uint64(i))
		b.Entries = append(b.Entries, e)
		b.LeafHashes = append(b.LeafHashes, sha256.Sum256(append([]byte{0}, e...)))
	}
	end := start + uint64(n)
	for t := start / ledger.TileWidth; t*ledger.TileWidth < end; t++ {
		hashes := bytes.Repeat([]byte{7}, tileWidth(start, 0, t)*ledger.HashSize)
		for i := max(start, t*ledger.TileWidth); i < min(end, (t+1)*ledger.TileWidth); i++ {
			hashes = append(hashes, b.LeafHashes[i-start][:]...)
		}
		b.Tiles = append(b.Tiles, ledger.Tile{Level: 0, Index: t, Hashes: hashes})
	}
	if w := tileWidth(start, 1, 0); w < ledger.TileWidth {
		b.Tiles = append(b.Tiles, ledger.Tile{Level: 1, Index: 0, Hashes: bytes.Repeat([]byte{9}, (w+1)*ledger.HashSize)})
	}
	return b
}

// decodeFrame takes any bytes without panicking, and what it accepts
// holds tiles a reader can rebuild: each adding 1 to 256 hashes from a
// first below 256, the tile's width at the frame's start for a delta
// frame's; the frame of a batch decodes to the batch, with each tile's
// hashes from its width on.
func FuzzDecodeFrame(f *testing.F) {
	for _, c := range []struct {
		start uint64
		n     int
	}{{0, 1}, {5, 300}, {255, 2}, {65530, 10}, {1 << 20, 3}} {
		b := fuzzBatch(c.start, c.n)
		frame, _, err := encodeFrame(nil, b, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame[frameHeaderSize:])
		payload, _ := payloadOf(f, b, true)
		f.Add(payload)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, tiles, _, err := decodeFrame(payload)
		if err != nil {
			return
		}
		delta := binary.BigEndian.Uint32(payload[12:])&deltaFormat != 0
		for _, ft := range tiles {
			k := len(ft.hashes) / ledger.HashSize
			if k == 0 || len(ft.hashes)%ledger.HashSize != 0 || ft.first+k > ledger.TileWidth {
				t.Fatalf("tile %d/%d: %d bytes from %d", ft.level, ft.index, len(ft.hashes), ft.first)
			}
			if delta && ft.first != tileWidth(b.Start, ft.level, ft.index) || !delta && ft.first != 0 {
				t.Fatalf("tile %d/%d from %d at start %d", ft.level, ft.index, ft.first, b.Start)
			}
		}
	})
}

// payloadOf returns the payload of b's frame, in the delta format or the
// format before it, and the tiles decodeFrame returns of it.
func payloadOf(t testing.TB, b ledger.Batch, delta bool) ([]byte, []frameTile) {
	t.Helper()
	var frame []byte
	var err error
	if delta {
		frame, _, err = encodeFrame(nil, b, nil)
	} else {
		frame, _, err = encodeOldFrame(nil, b, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, tiles, _, err := decodeFrame(frame[frameHeaderSize:])
	if err != nil {
		t.Fatal(err)
	}
	if got.Start != b.Start || len(got.Entries) != len(b.Entries) {
		t.Fatalf("decoded a batch of %d at %d, want %d at %d", len(got.Entries), got.Start, len(b.Entries), b.Start)
	}
	for i := range b.Entries {
		if !bytes.Equal(got.Entries[i], b.Entries[i]) || got.LeafHashes[i] != b.LeafHashes[i] {
			t.Fatalf("entry %d differs", b.Start+uint64(i))
		}
	}
	return frame[frameHeaderSize:], tiles
}

// A frame of a batch decodes to its entries and, for each tile, the
// hashes from its width at the batch's start (the delta format) or the
// whole tile (the format before it).
func TestFrameRoundTrip(t *testing.T) {
	for _, c := range []struct {
		start uint64
		n     int
	}{{0, 1}, {5, 300}, {255, 2}, {65530, 10}, {1 << 20, 3}} {
		b := fuzzBatch(c.start, c.n)
		for _, delta := range []bool{true, false} {
			_, tiles := payloadOf(t, b, delta)
			if len(tiles) != len(b.Tiles) {
				t.Fatalf("batch at %d (delta %v): %d tiles decoded, want %d", c.start, delta, len(tiles), len(b.Tiles))
			}
			for i, bt := range b.Tiles {
				ft := tiles[i]
				first := 0
				if delta {
					first = tileWidth(b.Start, bt.Level, bt.Index)
				}
				if ft.level != bt.Level || ft.index != bt.Index || ft.first != first || !bytes.Equal(ft.hashes, bt.Hashes[first*ledger.HashSize:]) {
					t.Fatalf("batch at %d (delta %v): tile %d/%d decoded as %d/%d from %d, %d bytes", c.start, delta, bt.Level, bt.Index, ft.level, ft.index, ft.first, len(ft.hashes))
				}
			}
		}
	}
}
