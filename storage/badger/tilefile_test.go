package badger_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// Full tiles live in tiles/level-L, partial ones in badger (tilefile.go).
// These tests commit batches of whole tiles, then look at the files and
// at badger's keys directly, and put them in the states an older store
// or a crash leaves.

const tileBytes = ledger.TileWidth * ledger.HashSize

// tileStore commits n batches of 256 entries, each completing one level-0
// tile, to a new store in dir and closes it; it returns the batches.
func tileStore(t *testing.T, dir string, n int) []ledger.Batch {
	t.Helper()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	var batches []ledger.Batch
	for i := range n {
		b := testBatch(uint64(i*ledger.TileWidth), ledger.TileWidth)
		if len(b.Tiles) != 1 || len(b.Tiles[0].Hashes) != tileBytes {
			t.Fatal("the test needs batches of one full tile")
		}
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return batches
}

// indexTiles returns the sizes of the tiles badger holds, by key.
func indexTiles(t *testing.T, dir string) map[string]int {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tiles := map[string]int{}
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{'t'}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			tiles[string(it.Item().Key())] = int(it.Item().ValueSize())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tiles
}

// updateIndex changes badger's keys in the store in dir, which is closed.
func updateIndex(t *testing.T, dir string, fn func(txn *badgerdb.Txn) error) {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func tileKey(level uint8, index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{'t', level}, index)
}

// wantTiles opens the store in dir and checks that it serves every
// batch's tile, and that Check passes.
func wantTiles(t *testing.T, dir string, batches []ledger.Batch) {
	t.Helper()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	for _, b := range batches {
		tile := b.Tiles[0]
		if got, err := s.Tile(t.Context(), tile.Level, tile.Index); err != nil || !bytes.Equal(got, tile.Hashes) {
			t.Fatalf("Tile(%d, %d) = %d bytes, %v; want the batch's full tile", tile.Level, tile.Index, len(got), err)
		}
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A full tile is written to its level's file, in its slot, and not to
// badger.
func TestBadgerFullTilesInFiles(t *testing.T) {
	dir := t.TempDir()
	batches := tileStore(t, dir, 5)
	if tiles := indexTiles(t, dir); len(tiles) != 0 {
		t.Fatalf("badger holds %d tiles (%v); want the full tiles in the tile files only", len(tiles), tiles)
	}
	info, err := os.Stat(filepath.Join(dir, "tiles", "level-0"))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(5 * (tileBytes + 4)); info.Size() != want {
		t.Fatalf("tiles/level-0 holds %d bytes, want %d (5 slots)", info.Size(), want)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("tiles/level-0 has mode %v, want 0600", info.Mode().Perm())
	}
	wantTiles(t, dir, batches)
}

// A store whose full tiles are in badger, as every store written before
// the tile files, has them moved to the files at Open.
func TestBadgerMovesFullTilesToFiles(t *testing.T) {
	dir := t.TempDir()
	batches := tileStore(t, dir, 4)
	// The layout before the tile files: every tile in badger.
	updateIndex(t, dir, func(txn *badgerdb.Txn) error {
		for _, b := range batches {
			if err := txn.Set(tileKey(0, b.Tiles[0].Index), b.Tiles[0].Hashes); err != nil {
				return err
			}
		}
		if err := txn.Set(tileKey(0, 4), bytes.Repeat([]byte{7}, 3*ledger.HashSize)); err != nil { // a partial one stays
			return err
		}
		return txn.Delete([]byte("mtilefiles"))
	})
	if err := os.RemoveAll(filepath.Join(dir, "tiles")); err != nil {
		t.Fatal(err)
	}
	wantTiles(t, dir, batches)
	tiles := indexTiles(t, dir)
	if len(tiles) != 1 || tiles[string(tileKey(0, 4))] != 3*ledger.HashSize {
		t.Fatalf("badger holds the tiles %v after the move; want only the partial tile 0/4", tiles)
	}
	wantTiles(t, dir, batches) // and again, from the files alone
}

// Tile writes the index had not yet recorded as done (the "tiles" mark)
// may be lost in a crash; Open writes them again from the frames.
func TestBadgerRewritesLostTiles(t *testing.T) {
	dir := t.TempDir()
	batches := tileStore(t, dir, 6)
	// As if the mark had last been made durable before any frame, and
	// the unsynced tile writes after it were lost, but for a torn slot.
	updateIndex(t, dir, func(txn *badgerdb.Txn) error {
		if err := txn.Delete([]byte("mtilefiles")); err != nil {
			return err
		}
		return txn.Delete([]byte("mtiles"))
	})
	path := filepath.Join(dir, "tiles", "level-0")
	if err := os.Truncate(path, 2*(tileBytes+4)+100); err != nil {
		t.Fatal(err)
	}
	wantTiles(t, dir, batches)
}

// A tile file lost, or cut short, after the tiles mark covered it is
// reported at Open: its tiles are not replayed.
func TestBadgerLostTileFile(t *testing.T) {
	dir := t.TempDir()
	tileStore(t, dir, 3)
	path := filepath.Join(dir, "tiles", "level-0")
	if err := os.Truncate(path, 2*(tileBytes+4)); err != nil {
		t.Fatal(err)
	}
	_, err := badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
	wantCorrupt(t, err, "were written and synced")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
	wantCorrupt(t, err, "were written and synced")
}

// A tile slot that fails its checksum is reported, not served, and Check
// finds it.
func TestBadgerDamagedTileSlot(t *testing.T) {
	dir := t.TempDir()
	tileStore(t, dir, 3)
	path := filepath.Join(dir, "tiles", "level-0")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[(tileBytes+4)+1000] ^= 1 // in tile 0/1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	if _, err := s.Tile(t.Context(), 0, 1); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Tile(0, 1) of a damaged slot = %v, want ErrCorrupt", err)
	}
	if got, err := s.Tile(t.Context(), 0, 2); err != nil || len(got) != tileBytes {
		t.Fatalf("Tile(0, 2) = %d bytes, %v; want the undamaged tile", len(got), err)
	}
	if err := s.Check(t.Context()); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Check of a damaged tile slot = %v, want ErrCorrupt", err)
	}
}

// A tile slot of the tree zeroed, or a tile file cut short under an open
// store, is a lost tile: Tile reports it as damage, never as a tile that
// is not stored, and Check finds it; a tile beyond the tree is still not
// found.
func TestBadgerZeroedTileSlot(t *testing.T) {
	dir := t.TempDir()
	tileStore(t, dir, 4)
	path := filepath.Join(dir, "tiles", "level-0")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, tileBytes+4), tileBytes+4); err != nil { // slot 1
		t.Fatal(err)
	}
	f.Close()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	wantLost := func(index uint64, what string) {
		t.Helper()
		_, err := s.Tile(t.Context(), 0, index)
		if !errors.Is(err, ledger.ErrCorrupt) || errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Tile(0, %d), %s: %v; want ErrCorrupt, not ErrNotFound", index, what, err)
		}
	}
	wantLost(1, "its slot zeroed")
	if _, err := s.Tile(t.Context(), 0, 4); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Tile(0, 4), beyond the tree of 1024 entries: %v; want ErrNotFound", err)
	}
	if err := s.Check(t.Context()); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Check of a zeroed tile slot = %v, want ErrCorrupt", err)
	}
	// Cut short while the store is open: slot 3 is gone.
	if err := os.Truncate(path, 3*(tileBytes+4)); err != nil {
		t.Fatal(err)
	}
	wantLost(3, "its file cut short")
	if got, err := s.Tile(t.Context(), 0, 2); err != nil || len(got) != tileBytes {
		t.Fatalf("Tile(0, 2) = %d bytes, %v; want the undamaged tile", len(got), err)
	}
}
