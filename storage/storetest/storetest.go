// Package storetest is the conformance suite for implementations of
// ledger.Store: storage/badger, storage/postgres and storage/memory pass
// it, and so must any other. Every Store runs it from its own test:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) (ledger.Store, func() ledger.Store) {
//			dir := t.TempDir()
//			s := openMyStore(t, dir)
//			return s, func() ledger.Store {
//				s.Close()
//				s = openMyStore(t, dir)
//				return s
//			}
//		})
//	}
//
// Each subtest checks one requirement of the Store contract against a model
// of what the store must hold, so it fails when that requirement breaks.
// The data looks like a real log's: entries of about 650 bytes, their
// RFC 6962 leaf hashes, and the tiles of the tree over them. No batch has
// more than 300 entries (about 200 KB), so a store that bounds the size
// of one commit must take at least that much.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/decisionledger/ledger/ledger"
)

// Run runs the conformance suite. open returns a new, empty store and a
// function reopen that closes the store and opens the same data again, as
// a restart would; Run calls both from the subtest's goroutine, and closes
// the last store it got when the subtest ends. The subtests run in
// parallel: open must return a store that shares nothing with the others
// it returned.
func Run(t *testing.T, open func(t *testing.T) (s ledger.Store, reopen func() ledger.Store)) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, h *harness)
	}{
		{"Empty", testEmpty},
		{"CommitAndRead", testCommitAndRead},
		{"TileReplacedByLaterBatch", testTileReplaced},
		{"TileLostIsDamage", testTileLost},
		{"CommitWrongStart", testCommitWrongStart},
		{"CommitMalformedBatch", testCommitMalformed},
		{"NotFound", testNotFound},
		{"ReadEntriesRanges", testReadEntriesRanges},
		{"ReadEntriesOutOfBounds", testReadEntriesOutOfBounds},
		{"ReadEntriesStopsAtError", testReadEntriesStops},
		{"RepeatedLeafHash", testRepeatedLeafHash},
		{"Checkpoints", testCheckpoints},
		{"CheckpointRefusals", testCheckpointRefusals},
		{"CheckpointSignatureAdded", testCheckpointSignatureAdded},
		{"Reopen", testReopen},
		{"NoAliasing", testNoAliasing},
		{"ConcurrentReaders", testConcurrentReaders},
		{"CommitsBesideCheckpoints", testCommitsBesideCheckpoints},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"Snapshot", testSnapshot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each on a store of its own
			s, reopen := open(t)
			h := &harness{s: s, reopen: reopen, m: newModel()}
			t.Cleanup(func() {
				if err := h.s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.test(t, h)
		})
	}
}

// testSnapshot: a ledger.SnapshotStore keeps one approval snapshot,
// refuses one beyond the tree, replaces it whole, copies its bytes both
// ways, keeps it across a reopen, and changes nothing else.
func testSnapshot(t *testing.T, h *harness) {
	ss, ok := h.s.(ledger.SnapshotStore)
	if !ok {
		t.Skip("the store keeps no approval snapshot (ledger.SnapshotStore is optional)")
	}
	ctx := t.Context()
	want := func(size uint64, snap []byte) {
		t.Helper()
		n, b, err := ss.Snapshot(ctx)
		if err != nil || n != size || !bytes.Equal(b, snap) {
			t.Fatalf("Snapshot = %d, %d bytes, %v; want %d, %d bytes", n, len(b), err, size, len(snap))
		}
	}
	wantNotFound(t, "Snapshot of a new store", func() error { _, _, err := ss.Snapshot(ctx); return err })
	wantConflict(t, "PutSnapshot beyond an empty tree", ss.PutSnapshot(ctx, 1, []byte("snapshot 1")))
	wantNotFound(t, "Snapshot after a refused PutSnapshot", func() error { _, _, err := ss.Snapshot(ctx); return err })
	if err := ss.PutSnapshot(ctx, 0, []byte("empty")); err != nil {
		t.Fatalf("PutSnapshot(0): %v", err)
	}
	want(0, []byte("empty"))

	h.grow(t, 10, 20)
	h.addCheckpoint(t, 30)
	// Large enough to span pages and chunks: ~40k approvals' worth.
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7 / 5)
	}
	put := bytes.Clone(big)
	if err := ss.PutSnapshot(ctx, 30, put); err != nil {
		t.Fatalf("PutSnapshot(30): %v", err)
	}
	put[0] ^= 1 // the store keeps its own copy
	want(30, big)
	if _, b, _ := ss.Snapshot(ctx); len(b) > 0 {
		b[1] ^= 1 // and hands out copies
	}
	want(30, big)
	wantConflict(t, "PutSnapshot beyond the tree", ss.PutSnapshot(ctx, 31, []byte("snapshot 31")))
	want(30, big)
	h.check(t)

	// A smaller one replaces it too: the ledger decides what to keep.
	if err := ss.PutSnapshot(ctx, 12, []byte("snapshot 12")); err != nil {
		t.Fatalf("PutSnapshot(12): %v", err)
	}
	want(12, []byte("snapshot 12"))
	if err := ss.PutSnapshot(ctx, 30, big); err != nil {
		t.Fatalf("PutSnapshot(30): %v", err)
	}
	h.doReopen(t)
	ss = h.s.(ledger.SnapshotStore)
	want(30, big)
	h.check(t)
}

// testIdempotencyKeys: keys committed with entries find them, survive a
// reopen, and a key already stored or repeated in a batch makes the whole
// batch fail with nothing written.
func testIdempotencyKeys(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 3)
	b := h.m.nextBatch(3)
	b.Keys = [][]byte{[]byte("mediator-1\x00k1"), nil, []byte("mediator-2\x00k1")}
	h.commit(t, b)
	for key, want := range map[string]uint64{"mediator-1\x00k1": 3, "mediator-2\x00k1": 5} {
		if got, err := h.s.IndexOfKey(ctx, []byte(key)); err != nil || got != want {
			t.Errorf("IndexOfKey(%q) = %d, %v; want %d", key, got, err, want)
		}
	}
	wantNotFound(t, "IndexOfKey(unknown)", func() error { _, err := h.s.IndexOfKey(ctx, []byte("mediator-1\x00k2")); return err })
	wantNotFound(t, "IndexOfKey(empty)", func() error { _, err := h.s.IndexOfKey(ctx, nil); return err })

	for name, keys := range map[string][][]byte{
		"already stored": {[]byte("mediator-1\x00k1"), nil},
		"repeated":       {[]byte("k9"), []byte("k9")},
		"too few keys":   {[]byte("k8")},
	} {
		b := h.m.nextBatch(2)
		b.Keys = keys
		wantConflict(t, "Commit with keys "+name, h.s.Commit(ctx, b))
		wantNotFound(t, "IndexOfKey after a refused batch", func() error { _, err := h.s.IndexOfKey(ctx, []byte("k8")); return err })
		h.check(t)
	}
	h.doReopen(t)
	if got, err := h.s.IndexOfKey(ctx, []byte("mediator-2\x00k1")); err != nil || got != 5 {
		t.Errorf("after reopen: IndexOfKey = %d, %v", got, err)
	}
	h.check(t)
}

// testCommitsBesideCheckpoints runs Commit in one goroutine and
// AddCheckpoint in another, as a ledger does: every checkpoint is for a
// size already committed, and everything is there afterwards, also after
// a reopen.
func testCommitsBesideCheckpoints(t *testing.T, h *harness) {
	ctx := t.Context()
	const batches = 60
	var committed atomic.Uint64
	done := make(chan struct{})
	added := map[uint64][]byte{}
	var cpErr error
	go func() {
		defer close(done)
		latest := uint64(0)
		// Until a checkpoint covers the last batch: the commits may all
		// be done before this goroutine first runs.
		for latest < batches*5 && ctx.Err() == nil {
			size := committed.Load()
			if size <= latest {
				runtime.Gosched()
				continue
			}
			signed := testCheckpoint(size)
			if err := h.s.AddCheckpoint(ctx, size, signed); err != nil {
				cpErr = fmt.Errorf("AddCheckpoint(%d) beside commits: %w", size, err)
				return
			}
			added[size], latest = signed, size
		}
	}()
	for range batches {
		b := h.m.nextBatch(5)
		if err := h.s.Commit(ctx, b); err != nil {
			t.Fatalf("Commit(%d) beside checkpoints: %v", b.Start, err)
		}
		h.m.apply(b)
		committed.Store(h.m.size())
	}
	<-done
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	if len(added) == 0 {
		t.Fatal("no checkpoint was added beside the commits")
	}
	for size, signed := range added {
		h.m.checkpoints[size] = signed
		if size >= h.m.latest {
			h.m.latest, h.m.hasCheckpoint = size, true
		}
	}
	h.check(t)
	h.doReopen(t)
	h.check(t)
}

// harness is a store under test and the model of what it must hold.
type harness struct {
	s      ledger.Store
	reopen func() ledger.Store
	m      *model
}

// commit commits b, which must succeed, and applies it to the model.
func (h *harness) commit(t *testing.T, b ledger.Batch) {
	t.Helper()
	if err := h.s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit(batch at %d of %d entries): %v", b.Start, len(b.Entries), err)
	}
	h.m.apply(b)
}

// grow commits batches of the given sizes, built by the model.
func (h *harness) grow(t *testing.T, sizes ...int) {
	t.Helper()
	for _, n := range sizes {
		h.commit(t, h.m.nextBatch(n))
	}
}

func (h *harness) addCheckpoint(t *testing.T, size uint64) {
	t.Helper()
	signed := testCheckpoint(size)
	if err := h.s.AddCheckpoint(t.Context(), size, signed); err != nil {
		t.Fatalf("AddCheckpoint(%d): %v", size, err)
	}
	h.m.checkpoints[size] = signed
	h.m.latest, h.m.hasCheckpoint = size, true
}

func (h *harness) doReopen(t *testing.T) {
	t.Helper()
	h.s = h.reopen()
}

// check fails t unless the store holds exactly what the model says: the
// state, every entry (one by one and through ReadEntries), every leaf hash,
// every tile and every checkpoint, and nothing just past them.
func (h *harness) check(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	s, m := h.s, h.m
	size := uint64(len(m.entries))

	st, err := s.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if st.Size != size {
		t.Errorf("State().Size = %d, want %d", st.Size, size)
	}
	if m.hasCheckpoint {
		if st.CheckpointSize != m.latest || !bytes.Equal(st.Checkpoint, m.checkpoints[m.latest]) {
			t.Errorf("State() checkpoint = size %d %q, want size %d %q",
				st.CheckpointSize, st.Checkpoint, m.latest, m.checkpoints[m.latest])
		}
	} else if st.Checkpoint != nil || st.CheckpointSize != 0 {
		t.Errorf("State() checkpoint = size %d %q, want none", st.CheckpointSize, st.Checkpoint)
	}

	for i, want := range m.entries {
		got, err := s.Entry(ctx, uint64(i))
		if err != nil {
			t.Fatalf("Entry(%d): %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Entry(%d) = %.40q, want %.40q", i, got, want)
		}
	}
	wantNotFound(t, "Entry(size)", func() error { _, err := s.Entry(ctx, size); return err })

	next := uint64(0)
	err = s.ReadEntries(ctx, 0, size, func(i uint64, e []byte) error {
		if i != next {
			return fmt.Errorf("ReadEntries called fn with index %d, want %d", i, next)
		}
		if !bytes.Equal(e, m.entries[i]) {
			return fmt.Errorf("ReadEntries: entry %d = %.40q, want %.40q", i, e, m.entries[i])
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatalf("ReadEntries(0, %d): %v", size, err)
	}
	if next != size {
		t.Fatalf("ReadEntries(0, %d) called fn %d times", size, next)
	}

	for h, want := range m.leafIndex {
		got, err := s.IndexOf(ctx, h)
		if err != nil {
			t.Fatalf("IndexOf(%x): %v", h[:4], err)
		}
		if got != want {
			t.Fatalf("IndexOf(%x) = %d, want %d", h[:4], got, want)
		}
	}

	for id, want := range m.tiles {
		got, err := s.Tile(ctx, id.level, id.index)
		if err != nil {
			t.Fatalf("Tile(%d, %d): %v", id.level, id.index, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Tile(%d, %d) has %d hashes, want %d (or differs)",
				id.level, id.index, len(got)/ledger.HashSize, len(want)/ledger.HashSize)
		}
	}
	for level := range uint8(3) {
		next := uint64(0)
		for id := range m.tiles {
			if id.level == level && id.index >= next {
				next = id.index + 1
			}
		}
		wantNotFound(t, fmt.Sprintf("Tile(%d, %d)", level, next), func() error {
			_, err := s.Tile(ctx, level, next)
			return err
		})
	}

	for size, want := range m.checkpoints {
		got, err := s.Checkpoint(ctx, size)
		if err != nil {
			t.Fatalf("Checkpoint(%d): %v", size, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Checkpoint(%d) = %q, want %q", size, got, want)
		}
	}
}

// wantNotFound fails t unless call returns an error wrapping ErrNotFound.
func wantNotFound(t *testing.T, what string, call func() error) {
	t.Helper()
	if err := call(); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("%s: got error %v, want ErrNotFound", what, err)
	}
}

// wantConflict fails t unless err wraps ErrConflict.
func wantConflict(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("%s: got error %v, want ErrConflict", what, err)
	}
}

func testEmpty(t *testing.T, h *harness) {
	ctx := t.Context()
	st, err := h.s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 0 || st.Checkpoint != nil || st.CheckpointSize != 0 {
		t.Errorf("State() of an empty store = %+v, want zero", st)
	}
	calls := 0
	if err := h.s.ReadEntries(ctx, 0, 0, func(uint64, []byte) error { calls++; return nil }); err != nil {
		t.Errorf("ReadEntries(0, 0) of an empty store: %v", err)
	}
	if calls != 0 {
		t.Errorf("ReadEntries(0, 0) called fn %d times", calls)
	}
	h.check(t)
	wantNotFound(t, "Entry(0)", func() error { _, err := h.s.Entry(ctx, 0); return err })
	wantNotFound(t, "Tile(0, 0)", func() error { _, err := h.s.Tile(ctx, 0, 0); return err })
	wantNotFound(t, "IndexOf", func() error { _, err := h.s.IndexOf(ctx, leafHash(testEntry(0, 0))); return err })
	wantNotFound(t, "Checkpoint(0)", func() error { _, err := h.s.Checkpoint(ctx, 0); return err })
	wantNotFound(t, "ReadEntries(0, 1)", func() error {
		return h.s.ReadEntries(ctx, 0, 1, func(uint64, []byte) error { return nil })
	})
}

// testCommitAndRead grows the log across tile boundaries at both levels
// with batches of varied sizes, checking everything after each.
func testCommitAndRead(t *testing.T, h *harness) {
	for _, n := range []int{1, 1, 254, 256, 3, 300, 300, 200, 200} {
		h.grow(t, n)
		h.check(t)
	}
	// 1515 entries: 5 full level-0 tiles, a partial one, and a level-1
	// tile over the 5 full ones.
	if got, want := len(h.m.tiles[tileID{1, 0}]), 5*ledger.HashSize; got != want {
		t.Fatalf("test model: level-1 tile has %d bytes, want %d", got, want)
	}
}

func testTileReplaced(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 3)
	h.grow(t, 7) // tile 0/0 grows from 3 to 10 hashes
	got, err := h.s.Tile(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got) / ledger.HashSize; n != 10 {
		t.Fatalf("Tile(0, 0) has %d hashes after growing to 10", n)
	}
	h.check(t)

	// A later batch replaces a tile whole: the store keeps the bytes of the
	// last version, not a merge of the versions.
	b := h.m.nextBatch(1)
	replacement := bytes.Repeat([]byte{0xA5}, 4*ledger.HashSize)
	b.Tiles = append(b.Tiles, ledger.Tile{Level: 2, Index: 0, Hashes: bytes.Repeat([]byte{0x5A}, 9*ledger.HashSize)})
	h.commit(t, b)
	b = h.m.nextBatch(1)
	b.Tiles = append(b.Tiles, ledger.Tile{Level: 2, Index: 0, Hashes: replacement})
	h.commit(t, b)
	got, err = h.s.Tile(ctx, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, replacement) {
		t.Errorf("Tile(2, 0) = %d bytes starting %x, want the last version committed (%d bytes of a5)",
			len(got), got[:1], len(replacement))
	}
	h.check(t)
}

// testTileLost: a tile of the stored tree that the store does not hold
// was lost, since the ledger's batches carry every tile they change. A
// batch without one of its tiles stands in for the loss here (a store
// cannot tell the two apart): Tile reports it as damage, ErrCorrupt and
// not ErrNotFound, before and after a reopen, while a tile beyond the
// tree stays ErrNotFound.
func testTileLost(t *testing.T, h *harness) {
	ctx := t.Context()
	b := h.m.nextBatch(300) // tiles 0/0 (full), 0/1 and 1/0
	kept := b.Tiles[:0:0]
	for _, tile := range b.Tiles {
		if tile.Level != 0 || tile.Index != 0 {
			kept = append(kept, tile)
		}
	}
	if len(kept) != len(b.Tiles)-1 {
		t.Fatalf("test model: the batch of 300 entries has no tile 0/0 (%d tiles)", len(b.Tiles))
	}
	b.Tiles = kept
	h.commit(t, b)
	for round := range 2 {
		_, err := h.s.Tile(ctx, 0, 0)
		if !errors.Is(err, ledger.ErrCorrupt) || errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("round %d: Tile(0, 0), lost from the tree of 300 entries: got error %v, want ErrCorrupt (and not ErrNotFound)", round, err)
		}
		for _, id := range []tileID{{0, 2}, {1, 1}, {2, 0}} {
			wantNotFound(t, fmt.Sprintf("round %d: Tile(%d, %d), beyond the tree", round, id.level, id.index), func() error {
				_, err := h.s.Tile(ctx, id.level, id.index)
				return err
			})
		}
		h.check(t)
		h.doReopen(t)
	}
}

func testCommitWrongStart(t *testing.T, h *harness) {
	ctx := t.Context()
	// On an empty store, only Start 0 continues the log.
	b := h.m.nextBatch(2)
	b.Start = 1
	wantConflict(t, "Commit(Start 1) on an empty store", h.s.Commit(ctx, b))
	h.check(t)

	h.grow(t, 260)
	h.addCheckpoint(t, 260)
	for _, start := range []uint64{0, 259, 261, 1 << 40} {
		// A batch from another history: other entries, leaf hashes, and
		// tiles that would overwrite the stored ones.
		b := otherBatch(start, 5)
		err := h.s.Commit(ctx, b)
		wantConflict(t, fmt.Sprintf("Commit(Start %d) at size 260", start), err)
		h.check(t)
		for _, lh := range b.LeafHashes {
			wantNotFound(t, "IndexOf(leaf hash of a refused batch)", func() error {
				_, err := h.s.IndexOf(ctx, lh)
				return err
			})
		}
	}
	// The store still accepts the batch that does continue the log.
	h.grow(t, 5)
	h.check(t)
}

func testCommitMalformed(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 10)
	h.check(t)

	full := h.m.nextBatch(3)
	for _, tc := range []struct {
		name string
		b    ledger.Batch
		// contract: the Store contract names the error (ErrConflict);
		// otherwise any error will do.
		contract bool
	}{
		{"no entries", ledger.Batch{Start: 10}, true},
		{"empty slices with a tile", ledger.Batch{Start: 10, Entries: [][]byte{}, LeafHashes: [][ledger.HashSize]byte{},
			Tiles: full.Tiles}, true},
		{"fewer leaf hashes", ledger.Batch{Start: 10, Entries: full.Entries, LeafHashes: full.LeafHashes[:2], Tiles: full.Tiles}, true},
		{"more leaf hashes", ledger.Batch{Start: 10, Entries: full.Entries[:2], LeafHashes: full.LeafHashes, Tiles: full.Tiles}, true},
		{"no leaf hashes", ledger.Batch{Start: 10, Entries: full.Entries, Tiles: full.Tiles}, true},
		// Tile promises 1 to TileWidth whole hashes, so a store must not
		// take in anything else.
		{"empty tile", withTile(full, ledger.Tile{Level: 0, Index: 0, Hashes: nil}), false},
		{"tile of a partial hash", withTile(full, ledger.Tile{Level: 0, Index: 0, Hashes: make([]byte, 13*ledger.HashSize+1)}), false},
		{"tile of 257 hashes", withTile(full, ledger.Tile{Level: 0, Index: 0, Hashes: make([]byte, 257*ledger.HashSize)}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.s.Commit(ctx, tc.b)
			if tc.contract {
				wantConflict(t, "Commit", err)
			} else if err == nil {
				t.Errorf("Commit succeeded")
			}
			h.check(t)
			for _, lh := range full.LeafHashes {
				wantNotFound(t, "IndexOf(leaf hash of a refused batch)", func() error {
					_, err := h.s.IndexOf(ctx, lh)
					return err
				})
			}
		})
	}
	h.commit(t, full)
	h.check(t)
}

// withTile returns a copy of b with one more tile, which comes last so that
// the refusal cannot happen before the well-formed tiles are looked at.
func withTile(b ledger.Batch, t ledger.Tile) ledger.Batch {
	b.Tiles = append(slices.Clip(b.Tiles), t)
	return b
}

func testNotFound(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 300)
	h.addCheckpoint(t, 200)
	for _, i := range []uint64{300, 301, 1 << 32, 1<<64 - 1} {
		wantNotFound(t, fmt.Sprintf("Entry(%d)", i), func() error { _, err := h.s.Entry(ctx, i); return err })
	}
	for _, id := range []tileID{{0, 2}, {0, 1 << 40}, {1, 1}, {2, 0}, {255, 0}} {
		wantNotFound(t, fmt.Sprintf("Tile(%d, %d)", id.level, id.index), func() error {
			_, err := h.s.Tile(ctx, id.level, id.index)
			return err
		})
	}
	for _, e := range [][]byte{testEntry(1, 0), testEntry(0, 300), nil} {
		wantNotFound(t, "IndexOf(unknown leaf hash)", func() error { _, err := h.s.IndexOf(ctx, leafHash(e)); return err })
	}
	wantNotFound(t, "IndexOf(zero hash)", func() error { _, err := h.s.IndexOf(ctx, [ledger.HashSize]byte{}); return err })
	for _, size := range []uint64{0, 199, 201, 300} {
		wantNotFound(t, fmt.Sprintf("Checkpoint(%d)", size), func() error { _, err := h.s.Checkpoint(ctx, size); return err })
	}
	h.check(t)
}

func testReadEntriesRanges(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 100, 200, 50)
	size := uint64(len(h.m.entries))
	for _, r := range [][2]uint64{{0, size}, {0, 1}, {3, 7}, {99, 101}, {255, 257}, {size - 1, size}, {0, 0}, {42, 42}, {size, size}} {
		var got []uint64
		err := h.s.ReadEntries(ctx, r[0], r[1], func(i uint64, e []byte) error {
			if !bytes.Equal(e, h.m.entries[i]) {
				return fmt.Errorf("entry %d = %.40q, want %.40q", i, e, h.m.entries[i])
			}
			got = append(got, i)
			return nil
		})
		if err != nil {
			t.Errorf("ReadEntries(%d, %d): %v", r[0], r[1], err)
			continue
		}
		var want []uint64
		for i := r[0]; i < r[1]; i++ {
			want = append(want, i)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ReadEntries(%d, %d) called fn with indices %v, want %v", r[0], r[1], got, want)
		}
	}
}

func testReadEntriesOutOfBounds(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 20)
	for _, r := range [][2]uint64{{0, 21}, {19, 21}, {20, 21}, {21, 21}, {25, 30}, {5, 4}, {20, 19}, {1 << 63, 1}, {0, 1<<64 - 1}} {
		calls := 0
		err := h.s.ReadEntries(ctx, r[0], r[1], func(uint64, []byte) error { calls++; return nil })
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("ReadEntries(%d, %d) at size 20: got error %v, want ErrNotFound", r[0], r[1], err)
		}
		if calls != 0 {
			t.Errorf("ReadEntries(%d, %d) at size 20 called fn %d times before refusing", r[0], r[1], calls)
		}
	}
}

func testReadEntriesStops(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 20)
	errStop := errors.New("stop here")
	var got []uint64
	err := h.s.ReadEntries(ctx, 3, 20, func(i uint64, e []byte) error {
		got = append(got, i)
		if i == 6 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Errorf("ReadEntries returned %v, want the error fn returned", err)
	}
	if want := []uint64{3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("ReadEntries called fn with indices %v, want %v and then stop", got, want)
	}
	// A store must also stop when fn fails at the very first entry.
	calls := 0
	err = h.s.ReadEntries(ctx, 0, 20, func(uint64, []byte) error { calls++; return errStop })
	if !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("ReadEntries with fn failing at once: returned %v after %d calls, want %v after 1", err, calls, errStop)
	}
	h.check(t)
}

// testRepeatedLeafHash checks that IndexOf returns the lowest index of a
// leaf hash, whether the repeats are in one batch or in later ones. The
// ledger never repeats one; a store must still not let a later entry
// shadow an earlier one.
func testRepeatedLeafHash(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 5)
	repeated := h.m.leaves[2]
	b := h.m.nextBatch(4)
	b.LeafHashes[1] = repeated // index 6
	b.LeafHashes[3] = b.LeafHashes[0]
	h.commit(t, b)
	for _, tc := range []struct {
		leaf [ledger.HashSize]byte
		want uint64
	}{{repeated, 2}, {b.LeafHashes[0], 5}} {
		got, err := h.s.IndexOf(ctx, tc.leaf)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("IndexOf(repeated leaf hash) = %d, want the lowest index %d", got, tc.want)
		}
	}
	h.check(t)
}

func testCheckpoints(t *testing.T, h *harness) {
	ctx := t.Context()
	// The empty tree has a checkpoint too.
	h.addCheckpoint(t, 0)
	h.check(t)
	h.grow(t, 10)
	h.check(t) // the checkpoint stays at 0 while the tree grows
	h.addCheckpoint(t, 4)
	h.addCheckpoint(t, 10)
	h.check(t)
	h.grow(t, 300)
	h.addCheckpoint(t, 310)
	h.check(t)
	for _, size := range []uint64{0, 4, 10, 310} {
		got, err := h.s.Checkpoint(ctx, size)
		if err != nil || !bytes.Equal(got, testCheckpoint(size)) {
			t.Errorf("Checkpoint(%d) = %q, %v; want the one added", size, got, err)
		}
	}
}

func testCheckpointRefusals(t *testing.T, h *harness) {
	ctx := t.Context()
	refuse := func(size uint64, why string) {
		t.Helper()
		err := h.s.AddCheckpoint(ctx, size, testCheckpoint(size))
		wantConflict(t, fmt.Sprintf("AddCheckpoint(%d) %s", size, why), err)
		h.check(t)
		if _, stored := h.m.checkpoints[size]; !stored {
			wantNotFound(t, fmt.Sprintf("Checkpoint(%d) after refusing it", size), func() error {
				_, err := h.s.Checkpoint(ctx, size)
				return err
			})
		}
	}
	refuse(1, "beyond an empty tree")
	h.grow(t, 10)
	refuse(11, "beyond the tree size 10")
	refuse(1<<63, "beyond the tree size 10")
	h.addCheckpoint(t, 5)
	refuse(5, "equal to the latest")
	refuse(3, "below the latest")
	refuse(0, "below the latest")
	h.addCheckpoint(t, 10)
	refuse(7, "below the latest")
	refuse(10, "equal to the latest")

	// State reports no checkpoint as nil, so an empty one cannot be
	// stored; the kind of refusal is the store's choice.
	if err := h.s.AddCheckpoint(ctx, 10, nil); err == nil {
		t.Errorf("AddCheckpoint(10, nil) succeeded")
	}
	h.grow(t, 1)
	if err := h.s.AddCheckpoint(ctx, 11, []byte{}); err == nil {
		t.Errorf("AddCheckpoint(11, empty) succeeded")
	}
	h.check(t)
}

// testCheckpointSignatureAdded: the latest checkpoint with a signature
// line added (a key rotation's second signature) replaces it at the same
// size, durably; anything else for that size is refused.
func testCheckpointSignatureAdded(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 10)
	h.addCheckpoint(t, 4)
	h.addCheckpoint(t, 10)
	cp := testCheckpoint(10)
	second := append(bytes.Clone(cp), "— ledger.example.org/decisions/0 AAAAAQ==\n"...)
	for why, signed := range map[string][]byte{
		"another checkpoint":            testCheckpoint(9),
		"a line added before the last":  append([]byte("— x AAAAAQ==\n"), cp...),
		"truncated":                     cp[:len(cp)-2],
		"added bytes without a newline": append(bytes.Clone(cp), "— x AAAAAQ=="...),
	} {
		wantConflict(t, "AddCheckpoint(10) "+why, h.s.AddCheckpoint(ctx, 10, signed))
		h.check(t)
	}
	// Only the latest may gain a line, and only for its own size.
	wantConflict(t, "AddCheckpoint(4) with a line added", h.s.AddCheckpoint(ctx, 4, append(testCheckpoint(4), "— x AAAAAQ==\n"...)))
	wantConflict(t, "AddCheckpoint(4) the latest with a line added", h.s.AddCheckpoint(ctx, 4, second))
	if err := h.s.AddCheckpoint(ctx, 10, second); err != nil {
		t.Fatalf("AddCheckpoint(10) with a signature line added: %v", err)
	}
	h.m.checkpoints[10] = second
	h.check(t)
	wantConflict(t, "AddCheckpoint(10) the one replaced", h.s.AddCheckpoint(ctx, 10, cp))
	h.doReopen(t)
	h.check(t)
	h.grow(t, 1)
	h.addCheckpoint(t, 11)
	h.check(t)
}

func testReopen(t *testing.T, h *harness) {
	ctx := t.Context()
	h.grow(t, 1, 300)
	h.addCheckpoint(t, 1)
	h.addCheckpoint(t, 301)
	h.doReopen(t)
	h.check(t)

	// The reopened store continues the log, and still refuses what does not.
	wantConflict(t, "Commit(Start 300) after reopen", h.s.Commit(ctx, otherBatch(300, 2)))
	wantConflict(t, "AddCheckpoint(301) after reopen", h.s.AddCheckpoint(ctx, 301, testCheckpoint(301)))
	h.grow(t, 250)
	h.doReopen(t)
	h.check(t)
	h.addCheckpoint(t, 551)
	h.doReopen(t)
	h.check(t)
}

// testNoAliasing writes into every slice passed to and returned by the
// store, then checks that the store's data did not change; and checks
// that Commit wrote into none of the batch's slices, which the caller
// shares.
func testNoAliasing(t *testing.T, h *harness) {
	ctx := t.Context()
	b := h.m.nextBatch(300)
	given := cloneBatch(b)
	if err := h.s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(b.Entries, given.Entries, bytes.Equal) || !slices.Equal(b.LeafHashes, given.LeafHashes) ||
		!slices.EqualFunc(b.Tiles, given.Tiles, func(a, c ledger.Tile) bool {
			return a.Level == c.Level && a.Index == c.Index && bytes.Equal(a.Hashes, c.Hashes)
		}) {
		t.Fatal("Commit wrote into the batch it was given")
	}
	h.m.apply(cloneBatch(b)) // the model keeps its own copy
	signed := testCheckpoint(300)
	if err := h.s.AddCheckpoint(ctx, 300, signed); err != nil {
		t.Fatal(err)
	}
	h.m.checkpoints[300] = bytes.Clone(signed)
	h.m.latest, h.m.hasCheckpoint = 300, true

	// The caller reuses its buffers after the calls return.
	for _, e := range b.Entries {
		clear(e)
	}
	for _, tile := range b.Tiles {
		clear(tile.Hashes)
	}
	clear(signed)
	h.check(t)

	// The caller writes into what it was given.
	e, err := h.s.Entry(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	clear(e)
	tile, err := h.s.Tile(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	clear(tile)
	c, err := h.s.Checkpoint(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	clear(c)
	st, err := h.s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clear(st.Checkpoint)
	if err := h.s.ReadEntries(ctx, 0, 300, func(_ uint64, e []byte) error { clear(e); return nil }); err != nil {
		t.Fatal(err)
	}
	h.check(t)
}

// testConcurrentReaders runs readers against a store while it commits and
// adds checkpoints, checking that every read sees a whole committed batch:
// a size from State means every entry below it, its leaf hash and its tile
// are readable.
func testConcurrentReaders(t *testing.T, h *harness) {
	ctx := t.Context()
	// Build every batch first, so readers can compare against the model
	// without sharing it with the writer.
	var batches []ledger.Batch
	sizes := map[uint64]bool{0: true}
	for i := range 60 {
		b := h.m.nextBatch(1 + i%13*3)
		h.m.apply(b)
		batches = append(batches, b)
		sizes[h.m.size()] = true
	}
	m := h.m

	var (
		wg     sync.WaitGroup
		done   = make(chan struct{})
		reads  atomic.Int64 // consistent reads made by all readers
		failed atomic.Bool
	)
	for r := range 4 {
		wg.Go(func() {
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := readConsistent(ctx, h.s, m, sizes, &last); err != nil {
					t.Errorf("reader %d: %v", r, err)
					failed.Store(true)
					return
				}
				reads.Add(1)
			}
		})
	}

	readsBefore := int64(0)
	for i, b := range batches {
		// Let a read in between any two commits, however fast the store.
		for reads.Load() == readsBefore && !failed.Load() {
			runtime.Gosched()
		}
		readsBefore = reads.Load()
		if failed.Load() {
			break
		}
		if err := h.s.Commit(ctx, b); err != nil {
			t.Errorf("Commit(batch at %d): %v", b.Start, err)
			break
		}
		if i%10 == 9 {
			size := b.Start + uint64(len(b.Entries))
			if err := h.s.AddCheckpoint(ctx, size, testCheckpoint(size)); err != nil {
				t.Errorf("AddCheckpoint(%d): %v", size, err)
				break
			}
			m.checkpoints[size] = testCheckpoint(size)
			m.latest, m.hasCheckpoint = size, true
		}
	}
	close(done)
	wg.Wait()
	if t.Failed() {
		return // the model is ahead of a writer that stopped
	}
	h.check(t)
}

// readConsistent reads the store once the way a client would and checks
// that what it sees belongs to one committed state at least as new as last.
func readConsistent(ctx context.Context, s ledger.Store, m *model, sizes map[uint64]bool, last *uint64) error {
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	n := st.Size
	if !sizes[n] {
		return fmt.Errorf("State().Size = %d, which is not the end of any batch", n)
	}
	if n < *last {
		return fmt.Errorf("State().Size went back from %d to %d", *last, n)
	}
	*last = n
	if st.Checkpoint != nil {
		if st.CheckpointSize > n {
			return fmt.Errorf("State() has a checkpoint for size %d beyond size %d", st.CheckpointSize, n)
		}
		if want := testCheckpoint(st.CheckpointSize); !bytes.Equal(st.Checkpoint, want) {
			return fmt.Errorf("State() checkpoint for size %d = %q, want %q", st.CheckpointSize, st.Checkpoint, want)
		}
	}
	if n == 0 {
		return nil
	}
	last1 := n - 1
	e, err := s.Entry(ctx, last1)
	if err != nil {
		return fmt.Errorf("at size %d: Entry(%d): %w", n, last1, err)
	}
	if !bytes.Equal(e, m.entries[last1]) {
		return fmt.Errorf("at size %d: Entry(%d) differs", n, last1)
	}
	if i, err := s.IndexOf(ctx, m.leaves[last1]); err != nil || i != last1 {
		return fmt.Errorf("at size %d: IndexOf(leaf %d) = %d, %v", n, last1, i, err)
	}
	// The tile holding the last leaf has at least the hashes up to it; a
	// later commit may have grown it since.
	tileIndex := last1 / ledger.TileWidth
	tile, err := s.Tile(ctx, 0, tileIndex)
	if err != nil {
		return fmt.Errorf("at size %d: Tile(0, %d): %w", n, tileIndex, err)
	}
	want := m.tiles0Prefix(tileIndex, n)
	if !bytes.HasPrefix(tile, want) {
		return fmt.Errorf("at size %d: Tile(0, %d) has %d hashes, want at least the %d up to leaf %d",
			n, tileIndex, len(tile)/ledger.HashSize, len(want)/ledger.HashSize, last1)
	}
	from := n - min(n, 40)
	return s.ReadEntries(ctx, from, n, func(i uint64, e []byte) error {
		if !bytes.Equal(e, m.entries[i]) {
			return fmt.Errorf("at size %d: ReadEntries: entry %d differs", n, i)
		}
		return nil
	})
}

// model is what a store must hold after the operations a test made.
type model struct {
	entries       [][]byte
	leaves        [][ledger.HashSize]byte
	leafIndex     map[[ledger.HashSize]byte]uint64
	tiles         map[tileID][]byte
	checkpoints   map[uint64][]byte
	latest        uint64
	hasCheckpoint bool
}

type tileID struct {
	level uint8
	index uint64
}

func newModel() *model {
	return &model{
		leafIndex:   make(map[[ledger.HashSize]byte]uint64),
		tiles:       make(map[tileID][]byte),
		checkpoints: make(map[uint64][]byte),
	}
}

func (m *model) size() uint64 { return uint64(len(m.entries)) }

// nextBatch returns the batch of n entries that continues the model's log,
// with the tiles it changes, without applying it.
func (m *model) nextBatch(n int) ledger.Batch {
	start := m.size()
	b := ledger.Batch{Start: start}
	leaves := slices.Clone(m.leaves)
	for i := range uint64(n) {
		e := testEntry(0, start+i)
		b.Entries = append(b.Entries, e)
		b.LeafHashes = append(b.LeafHashes, leafHash(e))
		leaves = append(leaves, leafHash(e))
	}
	b.Tiles = tilesChanged(leaves, start, start+uint64(n))
	return b
}

// apply records a committed batch. Tiles replace those at the same place.
func (m *model) apply(b ledger.Batch) {
	for i, e := range b.Entries {
		m.entries = append(m.entries, e)
		m.leaves = append(m.leaves, b.LeafHashes[i])
		if _, ok := m.leafIndex[b.LeafHashes[i]]; !ok {
			m.leafIndex[b.LeafHashes[i]] = b.Start + uint64(i)
		}
	}
	for _, t := range b.Tiles {
		m.tiles[tileID{t.Level, t.Index}] = t.Hashes
	}
}

// tiles0Prefix returns the hashes that the level-0 tile index must start
// with at tree size n.
func (m *model) tiles0Prefix(index, n uint64) []byte {
	var b []byte
	for i := index * ledger.TileWidth; i < n && i < (index+1)*ledger.TileWidth; i++ {
		b = append(b, m.leaves[i][:]...)
	}
	return b
}

// tilesChanged returns the tiles of the tree over leaves that change when
// it grows from size from to size to: the level-0 tiles holding the new
// leaf hashes, and the level-1 tile holding the hashes of any newly full
// level-0 tiles. Level-1 tiles are not partial here, which the store does
// not care about.
func tilesChanged(leaves [][ledger.HashSize]byte, from, to uint64) []ledger.Tile {
	var tiles []ledger.Tile
	for t := from / ledger.TileWidth; t*ledger.TileWidth < to; t++ {
		end := min(to, (t+1)*ledger.TileWidth)
		var hashes []byte
		for _, h := range leaves[t*ledger.TileWidth : end] {
			hashes = append(hashes, h[:]...)
		}
		tiles = append(tiles, ledger.Tile{Level: 0, Index: t, Hashes: hashes})
	}
	fullBefore, fullAfter := from/ledger.TileWidth, to/ledger.TileWidth
	for t := fullBefore / ledger.TileWidth; fullAfter > fullBefore && t*ledger.TileWidth < fullAfter; t++ {
		var hashes []byte
		for full := t * ledger.TileWidth; full < min(fullAfter, (t+1)*ledger.TileWidth); full++ {
			root := subtreeHash(leaves[full*ledger.TileWidth : (full+1)*ledger.TileWidth])
			hashes = append(hashes, root[:]...)
		}
		tiles = append(tiles, ledger.Tile{Level: 1, Index: t, Hashes: hashes})
	}
	return tiles
}

// subtreeHash is the RFC 6962 hash of a perfect subtree over leaf hashes
// (len(leaves) a power of two).
func subtreeHash(leaves [][ledger.HashSize]byte) [ledger.HashSize]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	l, r := subtreeHash(leaves[:len(leaves)/2]), subtreeHash(leaves[len(leaves)/2:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// leafHash is the RFC 6962 leaf hash of e.
func leafHash(e []byte) [ledger.HashSize]byte {
	return sha256.Sum256(append([]byte{0}, e...))
}

// otherBatch returns a batch of n entries at start from another log than
// the model's, with tiles at the places the model's tiles are.
func otherBatch(start uint64, n int) ledger.Batch {
	b := ledger.Batch{Start: start}
	for i := range uint64(n) {
		e := testEntry(1, start+i)
		b.Entries = append(b.Entries, e)
		b.LeafHashes = append(b.LeafHashes, leafHash(e))
	}
	for _, id := range []tileID{{0, 0}, {0, 1}, {0, start / ledger.TileWidth}, {1, 0}} {
		b.Tiles = append(b.Tiles, ledger.Tile{Level: id.level, Index: id.index,
			Hashes: bytes.Repeat([]byte{0xEE}, 3*ledger.HashSize)})
	}
	return b
}

func cloneBatch(b ledger.Batch) ledger.Batch {
	c := ledger.Batch{Start: b.Start, LeafHashes: slices.Clone(b.LeafHashes)}
	for _, e := range b.Entries {
		c.Entries = append(c.Entries, bytes.Clone(e))
	}
	for _, t := range b.Tiles {
		c.Tiles = append(c.Tiles, ledger.Tile{Level: t.Level, Index: t.Index, Hashes: bytes.Clone(t.Hashes)})
	}
	return c
}

// testEntry returns entry index of log number logID, shaped like a signed
// ledger entry: about 650 bytes of JCS JSON with digests and a signature.
func testEntry(logID int, index uint64) []byte {
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte{byte(logID)}, index))
	params := sha256.Sum256(seed[:])
	tiers := sha256.Sum256(params[:])
	sig := sha512.Sum512(seed[:])
	return fmt.Appendf(nil, `{"action":"payments.send","attributes":{"amount":%d,"payee_domain":"supplier-%d.example"},`+
		`"applied_tiers":"sha256:%x","decision":"allow","index":%d,"key":"a1b2c3d4","mediator":"med-eu-1",`+
		`"origin":"ledger.example.org/%d","params":{"digest":"sha256:%x","size":%d},"policies":["pay-limit-v3"],`+
		`"prev":"sha256:%x","principal":"agent:p7","sig":"%s","time":"2026-03-01T12:%02d:%02d.%03dZ","v":1}`,
		binary.BigEndian.Uint32(seed[:])%1_000_000, index%97, tiers, index, logID, params,
		300+int(seed[4]), seed, base64.StdEncoding.EncodeToString(sig[:]),
		index/60%60, index%60, binary.BigEndian.Uint32(seed[8:])%1000)
}

// testCheckpoint returns a signed note shaped like a C2SP checkpoint for
// size; the store does not parse it.
func testCheckpoint(size uint64) []byte {
	root := sha256.Sum256(binary.BigEndian.AppendUint64(nil, size))
	sig := sha512.Sum512(root[:])
	keyHashAndSig := append([]byte{0x1f, 0x2e, 0x3d, 0x4c}, sig[:]...)
	return fmt.Appendf(nil, "ledger.example.org/decisions/0\n%d\n%s\n\n— ledger.example.org/decisions/0 %s\n",
		size, base64.StdEncoding.EncodeToString(root[:]), base64.StdEncoding.EncodeToString(keyHashAndSig))
}
