package badger_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// The frame log is what makes a badger Store's commits durable; badger's
// index of it may lag after a crash. These tests put the files in the
// states a crash or damage leaves and reopen.

// frameStore writes batches of 100 entries, each with an idempotency key,
// to a store in dir with 1 MiB segments.
type frameStore struct {
	t       *testing.T
	dir     string
	opts    badger.Options
	batches []ledger.Batch
	// checkpointAt, if set, is the tree size at which commit adds a
	// checkpoint, once the store holds that many entries.
	checkpointAt uint64
}

// testCheckpoint stands for the signed checkpoint for size: a store keeps
// checkpoints without reading them.
func testCheckpoint(size uint64) []byte {
	return fmt.Appendf(nil, "ledger.example.com/test\n%d\nroot\n\n— signature\n", size)
}

func newFrameStore(t *testing.T) *frameStore {
	return &frameStore{t: t, dir: t.TempDir(), opts: badger.Options{SegmentSize: 1 << 20, Logger: testLogger(t)}}
}

func (f *frameStore) open() (*badger.Store, error) {
	return badger.Open(f.t.Context(), f.dir, f.opts)
}

// commit opens the store, commits n more batches and closes it.
func (f *frameStore) commit(n int) {
	f.t.Helper()
	s, err := f.open()
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	for range n {
		b := treeBatch(uint64(100*len(f.batches)), 100)
		b.Keys = make([][]byte, len(b.Entries))
		for i := range b.Keys {
			b.Keys[i] = fmt.Appendf(nil, "key-%d", b.Start+uint64(i))
		}
		if err := s.Commit(f.t.Context(), b); err != nil {
			f.t.Fatal(err)
		}
		f.batches = append(f.batches, b)
		if size := uint64(100 * len(f.batches)); size == f.checkpointAt {
			if err := s.AddCheckpoint(f.t.Context(), size, testCheckpoint(size)); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		f.t.Fatal(err)
	}
}

// check reopens the store and checks that it holds exactly the batches
// committed: entries, leaf hashes, keys, tiles and size.
func (f *frameStore) check() {
	f.t.Helper()
	ctx := f.t.Context()
	s, err := f.open()
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	st, err := s.State(ctx)
	if err != nil || st.Size != uint64(100*len(f.batches)) {
		f.t.Fatalf("State = size %d, %v; want %d", st.Size, err, 100*len(f.batches))
	}
	var all [][]byte
	for _, b := range f.batches {
		all = append(all, b.Entries...)
		for i, k := range b.Keys {
			if got, err := s.IndexOfKey(ctx, k); err != nil || got != b.Start+uint64(i) {
				f.t.Fatalf("IndexOfKey(key of %d) = %d, %v", b.Start+uint64(i), got, err)
			}
			if got, err := s.IndexOf(ctx, b.LeafHashes[i]); err != nil || got != b.Start+uint64(i) {
				f.t.Fatalf("IndexOf(leaf %d) = %d, %v", b.Start+uint64(i), got, err)
			}
		}
	}
	err = s.ReadEntries(ctx, 0, st.Size, func(i uint64, e []byte) error {
		if !bytes.Equal(e, all[i]) {
			f.t.Fatalf("entry %d differs", i)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(f.batches) > 0 {
		last := f.batches[len(f.batches)-1]
		tile := last.Tiles[len(last.Tiles)-1]
		if got, err := s.Tile(ctx, tile.Level, tile.Index); err != nil || !bytes.Equal(got, tile.Hashes) {
			f.t.Fatalf("Tile(%d, %d) = %d bytes, %v; want the last batch's", tile.Level, tile.Index, len(got), err)
		}
	}
	if _, err := s.Entry(ctx, st.Size); !errors.Is(err, ledger.ErrNotFound) {
		f.t.Fatalf("Entry(size) = %v, want ErrNotFound", err)
	}
}

func (f *frameStore) segments() []string {
	f.t.Helper()
	names, err := filepath.Glob(filepath.Join(f.dir, "frames", "*.frames"))
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// frames returns a segment file's frames: its bytes without the zeros of
// its spare (a frame ends with an entry, whose last byte is '}').
func frames(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(b, "\x00")
}

// copyDir copies the files of src into a new dst. Of a store still open
// the copy is the state a crash would leave only while badger removes no
// file during it: a file removed mid-copy (a memtable flushed, a table
// compacted) leaves a copy no crash can, with the .mem gone but not the
// table it became, so copyDir fails then rather than pass the file over.
// TestBadgerPartialTilesAfterCrash writes far less than a memtable, so
// badger only appends to its .mem file, and a copy cut anywhere in that
// is a state a crash can leave.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// snapshotIndex returns a function that puts the index and the tile
// files back as they are now, as if badger had lost every unsynced write
// since, and the tile files every write since (they are synced only
// before the tiles mark).
func (f *frameStore) snapshotIndex() (restore func()) {
	f.t.Helper()
	snap := f.t.TempDir()
	for _, d := range []string{"index", "tiles"} {
		copyDir(f.t, filepath.Join(f.dir, d), filepath.Join(snap, d))
	}
	return func() {
		f.t.Helper()
		for _, d := range []string{"index", "tiles"} {
			if err := os.RemoveAll(filepath.Join(f.dir, d)); err != nil {
				f.t.Fatal(err)
			}
			copyDir(f.t, filepath.Join(snap, d), filepath.Join(f.dir, d))
		}
	}
}

func wantCorrupt(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "store is corrupt") || !strings.Contains(err.Error(), what) {
		t.Fatalf("got %v; want a corrupt-store error about %q", err, what)
	}
}

// Frames whose index badger lost are indexed again at open: entries,
// keys, leaf hashes, tiles and size, across several segments.
func TestBadgerReindexesFrames(t *testing.T) {
	f := newFrameStore(t)
	f.commit(3)
	restore := f.snapshotIndex()
	f.commit(30) // about 2 MB: new segments
	if n := len(f.segments()); n < 2 {
		t.Fatalf("%d segments; the test needs several", n)
	}
	restore()
	f.check()
	f.check() // the recovered index was made durable and is read as is
	f.commit(1)
	f.check()
}

// sectorAt returns the offset in the segment of the first whole 512-byte
// sector of the file that lies inside a frame at off of n bytes, past its
// header, and not in its last 512 bytes.
func sectorAt(t *testing.T, off, n int) int {
	t.Helper()
	at := (off/512 + 2) * 512
	if at+1024 > off+n {
		t.Fatalf("a frame of %d bytes has no sector to spare", n)
	}
	return at
}

// A frame whose write a crash cut short was never acknowledged: open
// erases it, and the store goes on from the frame before. Each case is a
// state a crash can leave: the file ends inside the frame (the write that
// grew it stopped), or sectors of the frame are still the zeros of the
// spare it was written into.
func TestBadgerTornFrame(t *testing.T) {
	for _, tail := range []struct {
		name string
		make func(frame []byte, off int) []byte
	}{
		{"half a frame, the file ends", func(frame []byte, _ int) []byte { return frame[:len(frame)/2] }},
		{"a header only, the file ends", func(frame []byte, _ int) []byte { return frame[:6] }},
		{"zeros", func(frame []byte, _ int) []byte { return make([]byte, 4096) }},
		{"half a frame, then the spare's zeros", func(frame []byte, off int) []byte {
			// A write cut at a page of the file, as SIGKILL cuts one.
			cut := (off+len(frame)/2)/4096*4096 - off
			return append(bytes.Clone(frame[:cut]), make([]byte, 1<<16)...)
		}},
		{"one sector lost in a power cut", func(frame []byte, off int) []byte {
			frame = bytes.Clone(frame)
			at := sectorAt(t, off, len(frame)) - off
			clear(frame[at : at+512])
			return append(frame, make([]byte, 1<<16)...)
		}},
		{"the frame's last bytes lost", func(frame []byte, off int) []byte {
			frame = bytes.Clone(frame)
			end := off + len(frame)
			clear(frame[len(frame)-(end%512):])
			if end%512 == 0 {
				clear(frame[len(frame)-512:])
			}
			return append(frame, make([]byte, 1<<16)...)
		}},
	} {
		t.Run(tail.name, func(t *testing.T) {
			f := newFrameStore(t)
			f.commit(2)
			restore := f.snapshotIndex()
			segs := f.segments()
			last := segs[len(segs)-1]
			before := frames(t, last)
			// Commit one more batch to capture its frame's bytes, then
			// put the files back as if the crash had cut that write.
			f.commit(1)
			frame := frames(t, last)[len(before):]
			f.batches = f.batches[:2]
			restore()
			if err := os.WriteFile(last, append(bytes.Clone(before), tail.make(frame, len(before))...), 0o600); err != nil {
				t.Fatal(err)
			}
			f.check()
			if got := frames(t, last); !bytes.Equal(got, before) {
				t.Fatalf("segment after open holds %d bytes of frames; want the %d before the torn frame", len(got), len(before))
			}
			f.commit(2)
			f.check()
		})
	}
}

// damageLastFrame commits batches and changes the last frame's bytes with
// damage, leaving the index as it was before that frame if behind, and
// returns the segment and the bytes it now holds.
func (f *frameStore) damageLastFrame(behind bool, damage func(frame []byte, off int)) (string, []byte) {
	f.t.Helper()
	f.commit(2)
	restore := f.snapshotIndex()
	segs := f.segments()
	seg := segs[len(segs)-1]
	before := len(frames(f.t, seg))
	f.commit(1)
	if behind {
		restore()
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		f.t.Fatal(err)
	}
	damage(b[before:len(frames(f.t, seg))], before)
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return seg, b
}

// wantRefused opens the store, wants a corrupt-store error about what, and
// checks that the open changed no byte of seg.
func (f *frameStore) wantRefused(seg string, was []byte, what string) {
	f.t.Helper()
	_, err := f.open()
	wantCorrupt(f.t, err, what)
	if !strings.Contains(err.Error(), "nothing was truncated") {
		f.t.Errorf("the refusal does not say that nothing was truncated: %v", err)
	}
	if got, _ := os.ReadFile(seg); !bytes.Equal(got, was) {
		f.t.Errorf("the refused open changed the segment")
	}
}

// Damage that is not a torn write is refused, never truncated: a frame the
// index records, one a signed checkpoint covers, one with written bytes
// after it, and one whose every sector is written, with and without the
// index behind.
func TestBadgerDamagedFrames(t *testing.T) {
	flip := func(frame []byte, _ int) { frame[len(frame)-10] ^= 1 }
	t.Run("acknowledged last frame changed, index behind", func(t *testing.T) {
		f := newFrameStore(t)
		seg, b := f.damageLastFrame(true, flip)
		f.wantRefused(seg, b, "every sector of its")
	})
	t.Run("header changed, index behind", func(t *testing.T) {
		f := newFrameStore(t)
		seg, b := f.damageLastFrame(true, func(frame []byte, _ int) { clear(frame[:4]) })
		f.wantRefused(seg, b, "its header gives no length")
	})
	t.Run("length shortened, index behind", func(t *testing.T) {
		f := newFrameStore(t)
		seg, b := f.damageLastFrame(true, func(frame []byte, _ int) {
			binary.BigEndian.PutUint32(frame, binary.BigEndian.Uint32(frame)-1000)
		})
		f.wantRefused(seg, b, "are written")
	})
	t.Run("first index changed, a sector lost, index behind", func(t *testing.T) {
		f := newFrameStore(t)
		seg, b := f.damageLastFrame(true, func(frame []byte, off int) {
			binary.BigEndian.PutUint64(frame[8:], 205)
			at := sectorAt(t, off, len(frame)) - off
			clear(frame[at : at+512])
		})
		f.wantRefused(seg, b, "its header says it starts at entry 205")
	})
	t.Run("sector lost in a frame a signed checkpoint covers", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 300
		seg, b := f.damageLastFrame(true, func(frame []byte, off int) {
			at := sectorAt(t, off, len(frame)) - off
			clear(frame[at : at+512])
		})
		f.wantRefused(seg, b, "a signed checkpoint covers 300 entries")
	})
	t.Run("frame followed by a whole frame", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(1)
		restore := f.snapshotIndex()
		f.commit(3)
		restore()
		seg := f.segments()[0]
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		// Inside the second frame, which the index does not record.
		b[len(frames(t, seg))*2/4] ^= 1
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		f.wantRefused(seg, b, "bytes after its end at log position")
	})
	t.Run("entry read back changed", func(t *testing.T) {
		// Runs of the frames' entries: open reads the frames after
		// the runs (window.go), none here.
		badger.SetRunSize(t, 100)
		f := newFrameStore(t)
		f.commit(2)
		seg := f.segments()[0]
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		// The last entry of the first batch sits just before the second
		// frame; it is indexed, so open does not read it.
		at := bytes.Index(b, f.batches[0].Entries[99]) + 40
		b[at] ^= 1
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Entry(t.Context(), 99)
		wantCorrupt(t, err, "entry 99 fails its checksum")
		err = s.ReadEntries(t.Context(), 0, 200, func(uint64, []byte) error { return nil })
		wantCorrupt(t, err, "entry 99 fails its checksum")
		if e, err := s.Entry(t.Context(), 98); err != nil || !bytes.Equal(e, f.batches[0].Entries[98]) {
			t.Errorf("Entry(98) = %v; the undamaged entry should read", err)
		}
	})
	t.Run("log shorter than the index", func(t *testing.T) {
		badger.SetRunSize(t, 100)
		f := newFrameStore(t)
		f.commit(2)
		seg := f.segments()[0]
		if err := os.Truncate(seg, int64(len(frames(t, seg)))-1); err != nil {
			t.Fatal(err)
		}
		_, err := f.open()
		wantCorrupt(t, err, "the frame log ends at")
	})
	t.Run("segment missing", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(50)
		segs := f.segments()
		if len(segs) < 3 {
			t.Fatalf("%d segments; the test needs 3", len(segs))
		}
		if err := os.Remove(segs[1]); err != nil {
			t.Fatal(err)
		}
		_, err := f.open()
		wantCorrupt(t, err, "but the next one starts at")
	})
	t.Run("store of the earlier layout", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := badger.Open(context.Background(), dir, badger.Options{})
		if err == nil || !strings.Contains(err.Error(), "layout") {
			t.Fatalf("Open = %v, want a refusal naming the layout", err)
		}
	})
}

// Between two flushes badger gets only full tiles; the partial tiles of a
// store that stops without closing come back from the frames.
func TestBadgerPartialTilesAfterCrash(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := badger.Options{Logger: testLogger(t)}
	s, err := badger.Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var last ledger.Batch
	for start := uint64(0); start < 300; start += 30 {
		last = testBatch(start, 30)
		if err := s.Commit(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	// The files as a crash would leave them, the store still open.
	crashed := filepath.Join(t.TempDir(), "store")
	copyDir(t, dir, crashed)
	c, err := badger.Open(ctx, crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tile := last.Tiles[len(last.Tiles)-1] // tile 0/1, partial: entries 256 to 299
	if len(tile.Hashes) == ledger.TileWidth*ledger.HashSize {
		t.Fatal("the test needs a partial tile")
	}
	if got, err := c.Tile(ctx, tile.Level, tile.Index); err != nil || !bytes.Equal(got, tile.Hashes) {
		t.Fatalf("Tile(%d, %d) after the crash = %d bytes, %v; want the %d of the last commit", tile.Level, tile.Index, len(got), err, len(tile.Hashes))
	}
	if st, err := c.State(ctx); err != nil || st.Size != 300 {
		t.Fatalf("State after the crash = %+v, %v", st, err)
	}
}

// Segments start small and grow with the log: a segment starting at log
// position p is cut at about min(SegmentSize, max(1 MiB, p)) bytes, across
// a reopen too.
func TestBadgerSegmentsGrow(t *testing.T) {
	f := newFrameStore(t)
	f.opts.SegmentSize = 0 // the default, 64 MiB
	f.commit(60)           // about 4 MiB: segments at 0, 1, 2 MiB
	f.commit(70)           // past 8 MiB
	f.check()
	segs := f.segments()
	if len(segs) < 5 {
		t.Fatalf("%d segments for about 8 MiB of frames; want them to start at 1 MiB and double", len(segs))
	}
	const frame = 80 << 10 // a frame of testBatch(_, 100), rounded up
	for i, path := range segs {
		first := segmentFirst(t, path)
		want := min(64<<20, max(1<<20, first))
		if i == len(segs)-1 {
			// Its file is the spare, written for where the segment before
			// would have ended if full: within a frame of here.
			if info, err := os.Stat(path); err != nil || info.Size() > want+frame {
				t.Errorf("the last segment, at %d, is a file of %d bytes (%v); want at most %d", first, info.Size(), err, want+frame)
			}
			continue
		}
		if n := segmentFirst(t, segs[i+1]) - first; n > want || n <= want-frame {
			t.Errorf("segment at log position %d holds %d bytes; want the last frame to end within %d bytes of %d", first, n, frame, want)
		}
	}
}

func segmentFirst(t *testing.T, path string) int64 {
	t.Helper()
	first, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".frames"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return first
}
