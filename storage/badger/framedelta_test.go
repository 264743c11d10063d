package badger_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// A frame holds only the hashes its batch adds to the tiles (framelog.go):
// these tests write stores of small batches with a ledger's tiles, lose
// the tiles the index holds, and check that Open rebuilds them and Check
// reads them, from frames of the delta format, of the format before it,
// and of both.

// smallBatches commits batches of 1 to 30 entries (a fixed sequence) to
// the store in dir from entry start until it holds end entries, with
// treeBatch's tiles, and closes it.
func smallBatches(t *testing.T, dir string, start, end uint64) {
	t.Helper()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	for i, n := start, uint64(1); i < end; n = n%30 + 7 { // 1, 8, 15, 22, 29, 6, ...
		n := min(n, end-i)
		if err := s.Commit(t.Context(), treeBatch(i, int(n))); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// wantTree opens the store in dir and checks that it holds every tile of
// the tree of size entries of testEntry (levels 0 and 1), and that Check
// passes.
func wantTree(t *testing.T, dir string, size uint64) {
	t.Helper()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	if st, err := s.State(t.Context()); err != nil || st.Size != size {
		t.Fatalf("State = %+v, %v; want size %d", st, err, size)
	}
	for level := range uint8(2) {
		for index := uint64(0); ledger.TileInTree(size, level, index); index++ {
			got, err := s.Tile(t.Context(), level, index)
			if want := treeTile(size, level, index); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Tile(%d, %d) = %d bytes, %v; want the tree's %d", level, index, len(got), err, len(want))
			}
		}
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// loseTiles removes every tile the closed store in dir holds (badger's
// partial tiles and the tile files) and the tiles mark, so that Open
// rebuilds every tile from the frames.
func loseTiles(t *testing.T, dir string) {
	t.Helper()
	updateIndex(t, dir, func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{'t'}})
		var keys [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range append(keys, []byte("mtiles"), []byte("mtilefiles")) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err := os.RemoveAll(filepath.Join(dir, "tiles")); err != nil {
		t.Fatal(err)
	}
}

// At ledgerd's batch sizes a frame costs little beside its entries: the
// entry records (length, checksum, leaf hash, key length: 42 bytes) and
// about 2 bytes per entry of frame header and level-1 tiles, where the
// format before the delta format carried the level-0 tile whole, about
// 4 KiB a frame. Batches of 1 to 30 entries (15 on average) cost at most
// 50 bytes per entry beyond the entry and its key.
func TestBadgerFrameLogBytesPerEntry(t *testing.T) {
	const limit = 50
	perEntry := func(t *testing.T, old bool, batch func(i uint64) uint64, size uint64) float64 {
		t.Helper()
		if old {
			badger.SetOldFrames(t)
			defer badger.SetNewFrames()
		}
		s := openBadger(t, t.TempDir(), badger.Options{Logger: testLogger(t)})
		defer s.Close()
		var entries int64
		for i := uint64(0); i < size; {
			b := treeBatch(i, int(min(batch(i), size-i)))
			if err := s.Commit(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			for _, e := range b.Entries {
				entries += int64(len(e))
			}
			i += uint64(len(b.Entries))
		}
		return float64(badger.FrameLogEnd(s)-entries) / float64(size)
	}
	n := uint64(1)
	small := func(uint64) uint64 { n = n%30 + 7; return n }
	got := perEntry(t, false, small, 3000)
	t.Logf("batches of 1 to 30 entries: %.1f bytes of frame log per entry beyond the entry", got)
	if got > limit {
		t.Errorf("batches of 1 to 30 entries: %.1f bytes of frame log per entry beyond the entry, want at most %d", got, limit)
	}
	n = 1
	if old := perEntry(t, true, small, 3000); old <= limit {
		t.Errorf("the format before the delta format takes %.1f bytes per entry; the test would not tell the two apart", old)
	} else {
		t.Logf("the same in the format before the delta format: %.1f bytes per entry", old)
	}
	if testing.Short() {
		return
	}
	for _, size := range []uint64{1, 23, 512} {
		batch := func(uint64) uint64 { return size }
		total := max(1000, 8*size)
		t.Logf("batches of %d: %.1f bytes per entry, %.1f in the format before", size,
			perEntry(t, false, batch, total), perEntry(t, true, batch, total))
	}
}

// A store of delta frames whose tiles are lost rebuilds every one of them
// at Open from the frames, each frame's hashes added to the version the
// frames before it left; so does one whose index is rolled back to an
// earlier tiles mark, from the partial tiles badger held then.
func TestBadgerDeltaFramesReplay(t *testing.T) {
	t.Run("every tile lost", func(t *testing.T) {
		dir := t.TempDir()
		smallBatches(t, dir, 0, 3000)
		loseTiles(t, dir)
		wantTree(t, dir, 3000)
		wantTree(t, dir, 3000) // as the replay left it
	})
	t.Run("index rolled back", func(t *testing.T) {
		f := newFrameStore(t)
		smallBatches(t, f.dir, 0, 1100)
		restore := f.snapshotIndex()
		smallBatches(t, f.dir, 1100, 3000)
		restore()
		wantTree(t, f.dir, 3000)
	})
}

// A tile made full after the tiles mark is written to its file, which is
// synced only with the next mark, so a crash may lose it; its partial
// version stays in badger until that mark, and a reopen replaying the
// frames after the mark rebuilds the tile from it.
func TestBadgerPartialTileKeptUntilMark(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	smallBatches(t, dir, 0, 300) // the mark at 300: tile 0/1 partial, in badger
	badger.SetTileFlushOff(t)
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	for i := uint64(300); i < 600; i += 20 { // tile 0/1 fills at 512
		if err := s.Commit(ctx, treeBatch(i, 20)); err != nil {
			t.Fatal(err)
		}
	}
	badger.WaitMerges(s)
	// The files as a crash leaves them, the store still open (badger
	// writes to its .mem file only), and the tile file as the mark
	// synced it: slot 1 lost.
	crashed := filepath.Join(t.TempDir(), "store")
	copyDir(t, dir, crashed)
	if err := os.Truncate(filepath.Join(crashed, "tiles", "level-0"), tileBytes+4); err != nil {
		t.Fatal(err)
	}
	wantTree(t, crashed, 600)
}

// Frames written before the delta format, each tile whole, are read as
// ever: a store of them opens, rebuilds lost tiles and checks, alone and
// followed by delta frames.
func TestBadgerOldFrames(t *testing.T) {
	t.Run("old frames", func(t *testing.T) {
		dir := t.TempDir()
		badger.SetOldFrames(t)
		smallBatches(t, dir, 0, 2000)
		badger.SetNewFrames()
		wantTree(t, dir, 2000)
		loseTiles(t, dir)
		wantTree(t, dir, 2000)
	})
	t.Run("old frames then delta frames", func(t *testing.T) {
		f := newFrameStore(t)
		badger.SetOldFrames(t)
		smallBatches(t, f.dir, 0, 1100)
		badger.SetNewFrames()
		restore := f.snapshotIndex()
		smallBatches(t, f.dir, 1100, 3000)
		wantTree(t, f.dir, 3000)
		// The delta frames replayed on the old frames' tiles.
		restore()
		wantTree(t, f.dir, 3000)
		// Every frame replayed: the delta frames on the tiles the old
		// frames rebuilt.
		loseTiles(t, f.dir)
		wantTree(t, f.dir, 3000)
	})
}

// deltaRecord is where a delta frame's first tile record is in a segment.
type deltaRecord struct {
	seg    string
	pos    int64 // the frame's log position
	fields frameFields
}

// deltaRecords returns the first tile record of every frame of the
// closed store in dir that has one.
func deltaRecords(t *testing.T, dir string) []deltaRecord {
	t.Helper()
	var recs []deltaRecord
	segs, err := filepath.Glob(filepath.Join(dir, "frames", "*.frames"))
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		b := frames(t, seg)
		for off := 0; off < len(b); off += 8 + int(binary.BigEndian.Uint32(b[off:])) {
			if f := parseFrameFields(t, b, off); f.tiles > 0 {
				recs = append(recs, deltaRecord{seg, segmentFirst(t, seg) + int64(off), f})
			}
		}
	}
	return recs
}

// damageRecord changes the byte at off in r's segment by flipping bit,
// and recomputes the frame's checksum if fixCRC.
func damageRecord(t *testing.T, r deltaRecord, off int, fixCRC bool) {
	t.Helper()
	b, err := os.ReadFile(r.seg)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 1
	if fixCRC {
		sum := crc32.Checksum(b[r.fields.payload[0]:r.fields.payload[1]], crc32.MakeTable(crc32.Castagnoli))
		binary.BigEndian.PutUint32(b[r.fields.crc:], sum)
	}
	if err := os.WriteFile(r.seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Damage to a delta frame's tile record is found: a flipped hash by the
// frame's checksum (at Open, which reads the frames whose tiles it
// rebuilds, and in Check), and under a checksum made to match by Check
// against the stored tile; a record whose first is not the tile's width
// at the frame's start is refused, naming the frame.
func TestBadgerDamagedDeltaFrames(t *testing.T) {
	// Runs of 100 entries: the damaged frame is below the runs' end, so
	// that Open, which reads the frames after it (window.go), does not
	// read it unless it replays its tiles.
	badger.SetRunSize(t, 100)
	build := func(t *testing.T) (string, deltaRecord) {
		dir := t.TempDir()
		smallBatches(t, dir, 0, 3000)
		recs := deltaRecords(t, dir)
		if len(recs) < 3 {
			t.Fatalf("%d frames with a tile record; the test needs several", len(recs))
		}
		return dir, recs[len(recs)/2]
	}
	check := func(t *testing.T, dir string) error {
		t.Helper()
		s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
		defer s.Close()
		return s.Check(t.Context())
	}
	open := func(t *testing.T, dir string) error {
		t.Helper()
		s, err := badger.Open(t.Context(), dir, badger.Options{Logger: testLogger(t)})
		if err == nil {
			s.Close()
		}
		return err
	}
	t.Run("hash, checksum", func(t *testing.T) {
		dir, r := build(t)
		damageRecord(t, r, r.fields.tileHashes+7, false)
		wantCorrupt(t, check(t, dir), "no whole frame at log position")
		loseTiles(t, dir)
		err := open(t, dir)
		wantCorrupt(t, err, "no whole frame at log position")
	})
	t.Run("hash, checksum made to match", func(t *testing.T) {
		dir, r := build(t)
		damageRecord(t, r, r.fields.tileHashes+7, true)
		wantCorrupt(t, check(t, dir), "tile 1/0: the stored tile is not the version the frame at log position")
	})
	for _, field := range []struct {
		name string
		off  int // from the record's hashes
	}{{"first", -3}, {"count", -1}} {
		t.Run(field.name, func(t *testing.T) {
			dir, r := build(t)
			damageRecord(t, r, r.fields.tileHashes+field.off, true)
			err := check(t, dir)
			wantCorrupt(t, err, fmt.Sprintf("frame at log position %d", r.pos))
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("Check = %v, want ErrCorrupt", err)
			}
			loseTiles(t, dir)
			err = open(t, dir)
			wantCorrupt(t, err, fmt.Sprintf("frame at log position %d", r.pos))
			if field.name == "first" && !strings.Contains(err.Error(), "adds hashes from") {
				t.Fatalf("Open = %v, want the record's first named", err)
			}
		})
	}
}

// Commit refuses, writing nothing, a batch whose tile does not begin
// with the stored tile's hashes: its frame would hold only the hashes
// after them.
func TestBadgerCommitRefusesRewrittenTile(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	if err := s.Commit(ctx, treeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	b := treeBatch(10, 5)
	b.Tiles[0].Hashes = bytes.Clone(b.Tiles[0].Hashes)
	b.Tiles[0].Hashes[3] ^= 1 // in entry 0's hash
	err := s.Commit(ctx, b)
	if !errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "tile 0/0 does not extend the stored tile") {
		t.Fatalf("Commit of a batch rewriting tile 0/0 = %v, want ErrConflict naming the tile", err)
	}
	if st, err := s.State(ctx); err != nil || st.Size != 10 {
		t.Fatalf("State = %+v, %v; want the 10 entries before", st, err)
	}
	if err := s.Commit(ctx, treeBatch(10, 5)); err != nil {
		t.Fatal(err)
	}
}

// A batch's level-0 tile whose new hashes are not its leaf hashes (no
// ledger's) has a record of its own, and is rebuilt as committed.
func TestBadgerLevel0TileRecord(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	if err := s.Commit(ctx, treeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	b := treeBatch(10, 5)
	// Entry 12 other than the one whose leaf hash the tile holds.
	b.Entries[2] = append(bytes.Clone(b.Entries[2]), ' ')
	b.LeafHashes[2] = leafHash(b.Entries[2])
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	loseTiles(t, dir)
	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	if got, err := s.Tile(ctx, 0, 0); err != nil || !bytes.Equal(got, b.Tiles[0].Hashes) {
		t.Fatalf("Tile(0, 0) = %d bytes, %v; want the %d committed", len(got), err, len(b.Tiles[0].Hashes))
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
