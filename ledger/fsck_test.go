package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// damagedStore serves a store's data with damage: entries changed,
// swapped or unreadable, a tile changed, the tree cut short, or the
// latest checkpoint gone.
type damagedStore struct {
	ledger.Store
	flip       map[uint64]int // entry -> byte to flip
	swap       [2]uint64      // entries served in each other's place, if they differ
	unreadable map[uint64]bool
	tile       *[3]uint64 // level, index, byte to flip
	size       uint64     // if not zero, the tree size the store reports
	noCP       bool       // State reports no checkpoint
}

func (s *damagedStore) change(i uint64, b []byte) []byte {
	if at, ok := s.flip[i]; ok {
		b = bytes.Clone(b)
		b[at%len(b)] ^= 0x01
	}
	return b
}

// sigFlip returns the offset of a character of b's signature, before its
// last (which holds padding bits), that flipping its lowest bit turns into
// another base64 character: the signature stays well formed and is wrong
// ('+', '/', 'z' and others would flip into characters that are not
// base64, and the entry would fail to parse instead).
func sigFlip(t *testing.T, b []byte) int {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	start := bytes.Index(b, []byte(`"sig":"`)) + len(`"sig":"`)
	for at := start; at < start+85 && at < len(b); at++ {
		if strings.IndexByte(alphabet, b[at]^0x01) >= 0 {
			return at
		}
	}
	t.Fatalf("no signature character to flip in %s", b)
	return 0
}

func (s *damagedStore) source(i uint64) uint64 {
	switch {
	case s.swap[0] == s.swap[1]:
	case i == s.swap[0]:
		return s.swap[1]
	case i == s.swap[1]:
		return s.swap[0]
	}
	return i
}

func (s *damagedStore) Entry(ctx context.Context, i uint64) ([]byte, error) {
	if s.unreadable[i] {
		return nil, fmt.Errorf("%w: entry %d fails its checksum", ledger.ErrCorrupt, i)
	}
	if s.size != 0 && i >= s.size {
		return nil, ledger.ErrNotFound
	}
	b, err := s.Store.Entry(ctx, s.source(i))
	if err != nil {
		return nil, err
	}
	return s.change(i, b), nil
}

func (s *damagedStore) ReadEntries(ctx context.Context, start, end uint64, fn func(uint64, []byte) error) error {
	if s.size != 0 && end > s.size {
		return ledger.ErrNotFound
	}
	for i := start; i < end; i++ {
		b, err := s.Entry(ctx, i)
		if err != nil {
			return err
		}
		if err := fn(i, b); err != nil {
			return err
		}
	}
	return nil
}

func (s *damagedStore) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	t, err := s.Store.Tile(ctx, level, index)
	if err == nil && s.tile != nil && uint64(level) == s.tile[0] && index == s.tile[1] {
		t = bytes.Clone(t)
		t[s.tile[2]%uint64(len(t))] ^= 0x01
	}
	return t, err
}

func (s *damagedStore) State(ctx context.Context) (ledger.State, error) {
	st, err := s.Store.State(ctx)
	if s.size != 0 {
		st.Size = s.size
	}
	if s.noCP {
		st.Checkpoint, st.CheckpointSize = nil, 0
	}
	return st, err
}

// fsckStore is a log of 3,000 entries with a checkpoint at 2,900 and 100
// entries after it.
func fsckStore(t *testing.T) (*memory.Store, *ledger.Key) {
	t.Helper()
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	appendN(t, l, 0, 2900)
	if _, err := l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2900, 100)
	l.StopSequencer() // no checkpoint for the last 100
	return s, k
}

// damageAt returns the damage reported in err that names entry i (as an
// entry or as a tile's leaf), or nil.
func damageAt(rep *ledger.FsckReport, i int64) *ledger.Damage {
	for _, err := range rep.Damage {
		if d, ok := errors.AsType[*ledger.Damage](err); ok && d.Entry == i {
			return d
		}
	}
	return nil
}

func TestFsck(t *testing.T) {
	s, k := fsckStore(t)
	ctx := context.Background()
	var calls int
	var last ledger.FsckProgress
	rep, err := ledger.Fsck(ctx, s, k, ledger.FsckOptions{Progress: func(p ledger.FsckProgress) { calls++; last = p }})
	if err != nil {
		t.Fatalf("Fsck of an undamaged store: %v", err)
	}
	if rep.Checked != 3000 || rep.StoreSize != 3000 || rep.CheckpointSize != 2900 || rep.Tiles < 12 || len(rep.Damage) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if calls < 2 || last.Checked != 3000 || last.Total != 3000 {
		t.Fatalf("%d progress calls, the last %+v", calls, last)
	}
	if _, err := ledger.Fsck(ctx, s, k, ledger.FsckOptions{Signatures: true, Workers: 3}); err != nil {
		t.Fatalf("Fsck with signatures of an undamaged store: %v", err)
	}

	type want struct {
		entry int64  // a damage names this entry (-1: none)
		tile  int    // a damage names tile 0/tile (-1: none)
		text  string // the report says this
	}
	cases := []struct {
		name  string
		store *damagedStore
		opts  ledger.FsckOptions
		want  []want
	}{
		{"entry-deep", &damagedStore{flip: map[uint64]int{1000: 40}}, ledger.FsckOptions{},
			[]want{{1000, 3, "the entry was changed"}, {1001, -1, "prev is not the entry hash of entry 1000"}}},
		{"entry-after-checkpoint", &damagedStore{flip: map[uint64]int{2950: 40}}, ledger.FsckOptions{},
			[]want{{2950, 11, "leaf hash"}}},
		{"two-entries", &damagedStore{flip: map[uint64]int{10: 40, 2500: 60}}, ledger.FsckOptions{},
			[]want{{10, 0, "the entry was changed"}, {2500, 9, "the entry was changed"}, {-1, -1, "follows from the damage above"}}},
		{"entry-signature", &damagedStore{flip: map[uint64]int{700: -1}}, ledger.FsckOptions{},
			[]want{{700, 2, "the tile was changed, or the entry's signature"}}},
		{"entry-signature-verified", &damagedStore{flip: map[uint64]int{700: -1}}, ledger.FsckOptions{Signatures: true},
			[]want{{700, -1, "signature by key"}}},
		{"entry-not-json", &damagedStore{flip: map[uint64]int{5: 0}}, ledger.FsckOptions{},
			[]want{{5, -1, "its bytes are not an entry"}}},
		{"full-tile", &damagedStore{tile: &[3]uint64{0, 4, 32*7 + 3}}, ledger.FsckOptions{},
			[]want{{4*256 + 7, 4, "the tile was changed"}}},
		{"level1-tile", &damagedStore{tile: &[3]uint64{1, 0, 32 + 1}}, ledger.FsckOptions{},
			[]want{{-1, -1, "tile 1/0: hash 1 is not the hash of entries 256 to 511"}}},
		{"swap", &damagedStore{swap: [2]uint64{300, 2000}}, ledger.FsckOptions{},
			[]want{{300, -1, "it says index 2000"}, {2000, -1, "it says index 300"}}},
		{"unreadable", &damagedStore{unreadable: map[uint64]bool{1500: true}}, ledger.FsckOptions{},
			[]want{{1500, -1, "it cannot be read"}}},
		{"truncated", &damagedStore{size: 2800}, ledger.FsckOptions{},
			[]want{{-1, -1, "checkpoint for tree size 2900: the store holds only 2800 entries"}}},
		{"checkpoint-lost", &damagedStore{noCP: true}, ledger.FsckOptions{},
			[]want{{-1, -1, "holds 3000 entries but no signed checkpoint"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.store.Store = s
			for i, at := range c.store.flip {
				if at < 0 { // a byte of the signature
					b, _ := s.Entry(ctx, i)
					c.store.flip[i] = sigFlip(t, b)
				}
			}
			rep, err := ledger.Fsck(ctx, c.store, k, c.opts)
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("Fsck = %v, want damage", err)
			}
			if rep.Checked != c.store.size && c.store.size != 0 || len(rep.Damage) == 0 {
				t.Fatalf("report %+v", rep)
			}
			for _, w := range c.want {
				if w.entry >= 0 {
					d := damageAt(rep, w.entry)
					if d == nil {
						t.Fatalf("no damage names entry %d: %v", w.entry, err)
					}
					if w.tile >= 0 && d.TileLevel < 0 {
						// The entry may be named by its chain and its tile.
						found := false
						for _, e := range rep.Damage {
							if d, ok := errors.AsType[*ledger.Damage](e); ok && d.Entry == w.entry && d.TileLevel == 0 && d.TileIndex == uint64(w.tile) {
								found = true
							}
						}
						if !found {
							t.Fatalf("no damage names tile 0/%d with entry %d: %v", w.tile, w.entry, err)
						}
					}
				}
				if !strings.Contains(err.Error(), w.text) {
					t.Fatalf("the report does not say %q: %v", w.text, err)
				}
			}
			// Damage that follows from damage reported is not reported
			// again: a changed entry makes one or two reports, not one per
			// tile level.
			if n := len(rep.Damage); n > 3*len(c.want)+1 {
				t.Fatalf("%d reports: %v", n, err)
			}
		})
	}
}

// Fsck goes on after damage up to MaxDamage and counts the rest.
func TestFsckMaxDamage(t *testing.T) {
	s, k := fsckStore(t)
	ds := &damagedStore{Store: s, flip: map[uint64]int{}}
	for i := range uint64(50) {
		ds.flip[i*50] = 40
	}
	rep, err := ledger.Fsck(context.Background(), ds, k, ledger.FsckOptions{MaxDamage: 20})
	if !errors.Is(err, ledger.ErrCorrupt) || len(rep.Damage) != 20 || rep.More < 80 || !strings.Contains(err.Error(), fmt.Sprintf("and %d more problems", rep.More)) {
		t.Fatalf("%d damage, %d more: %v", len(rep.Damage), rep.More, err)
	}
}

// An online fsck, beside a ledger appending from many goroutines, checks
// the tree at the latest checkpoint and finds nothing.
func TestFsckOnline(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	defer l.Close()
	appendN(t, l, 0, 1000)
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if _, err := l.Append(ctx, testRecord(t, 1000+g*100000+i)); err != nil {
					t.Error(err)
					return
				}
				appended.Add(1)
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	for round := range 5 {
		if _, err := l.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Fsck(ctx, ledger.FsckOptions{Workers: 1})
		if err != nil {
			t.Fatalf("round %d: online Fsck: %v", round, err)
		}
		if rep.Checked < 1000 || rep.Checked != rep.CheckpointSize || rep.StoreSize < rep.Checked {
			t.Fatalf("round %d: report %+v", round, rep)
		}
	}
	if appended.Load() == 0 {
		t.Fatal("nothing was appended during the checks")
	}
	// Offline, the partial tiles the appends grew past the checkpoint
	// are damage: a tile must not hold more than the tree.
	stop.Store(true)
	wg.Wait()
	st, _ := s.State(ctx)
	if st.Size%256 == 0 {
		appendN(t, l, 0, 1)
		st, _ = s.State(ctx)
	}
	rep, err := ledger.Fsck(ctx, &damagedStore{Store: s, size: st.Size - 1}, k, ledger.FsckOptions{})
	if !strings.Contains(fmt.Sprint(err), "more than the tree") {
		t.Fatalf("offline Fsck of a tree shorter than its tiles: %v (%+v)", err, rep)
	}
}

// The key check: a configured key that is not the log's is named, not
// taken for damage.
func TestFsckOtherKey(t *testing.T) {
	s, _ := fsckStore(t)
	_, err := ledger.Fsck(context.Background(), s, testKey(t), ledger.FsckOptions{})
	if !errors.As(err, new(*ledger.UnknownKeyError)) || errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Fsck with another key: %v", err)
	}
}
