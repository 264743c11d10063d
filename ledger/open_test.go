package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"strings"
	"testing"
)

// tamperStore returns stored data with one byte flipped, as if the
// disk or an operator had changed it.
type tamperStore struct {
	ledger.Store
	entry     int64 // index of the entry to change, or -1
	tileLevel int   // level of the tile to change, or -1
	tileIndex uint64
	at        int // byte to flip
	cp        bool
}

func (s *tamperStore) flip(b []byte) []byte {
	b = bytes.Clone(b)
	b[s.at%len(b)] ^= 0x01
	return b
}

func (s *tamperStore) Entry(ctx context.Context, i uint64) ([]byte, error) {
	b, err := s.Store.Entry(ctx, i)
	if err == nil && int64(i) == s.entry {
		b = s.flip(b)
	}
	return b, err
}

func (s *tamperStore) ReadEntries(ctx context.Context, start, end uint64, fn func(uint64, []byte) error) error {
	return s.Store.ReadEntries(ctx, start, end, func(i uint64, b []byte) error {
		if int64(i) == s.entry {
			b = s.flip(b)
		}
		return fn(i, b)
	})
}

func (s *tamperStore) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	t, err := s.Store.Tile(ctx, level, index)
	if err == nil && int(level) == s.tileLevel && index == s.tileIndex {
		t = s.flip(t)
	}
	return t, err
}

func (s *tamperStore) State(ctx context.Context) (ledger.State, error) {
	st, err := s.Store.State(ctx)
	if err == nil && s.cp {
		st.Checkpoint = s.flip(st.Checkpoint)
	}
	return st, err
}

// Open refuses a store in which any stored entry, tile or the checkpoint
// was changed, and accepts the untouched one.
func TestOpenDetectsTampering(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	appendN(t, l, 0, 700)
	if _, err := l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 700, 50) // durable, not yet checkpointed
	l.Close()              // publishes a final checkpoint at 750
	appendAfter := openTest(t, s, k)
	appendN(t, appendAfter, 750, 10) // durable after the latest checkpoint
	appendAfter.StopSequencer()      // stop without the final checkpoint

	// Every change is refused by a full check (Check, Open with
	// FullCheck). The default Open, whose cost does not grow with the log,
	// refuses those marked recent: a changed tile on the right edge or
	// one the checkpoint's root is computed from, a changed checkpoint, a
	// changed entry after the latest checkpoint. (Entries the checkpoint
	// covers, and the full tiles below the edge, are not read at Open:
	// Open may or may not notice them, fsck does.)
	cases := map[string]struct {
		ts     *tamperStore
		recent bool
	}{
		"entry-early":            {&tamperStore{entry: 3, tileLevel: -1, at: 40}, false},
		"entry-signature":        {&tamperStore{entry: 699, tileLevel: -1, at: 520}, false},
		"entry-after-checkpoint": {&tamperStore{entry: 755, tileLevel: -1, at: 10}, true},
		"entry-last":             {&tamperStore{entry: 759, tileLevel: -1, at: 300}, true},
		// A full tile below the edge: the root is computed from the
		// level-1 tile above it.
		"tile-level0-full":    {&tamperStore{entry: -1, tileLevel: 0, tileIndex: 0, at: 77}, false},
		"tile-level0-partial": {&tamperStore{entry: -1, tileLevel: 0, tileIndex: 2, at: 5}, true},
		// The hash of entry 755 in the right-edge tile: after the
		// checkpoint, so only the rehash of the entries after it sees it.
		"tile-level0-after-checkpoint": {&tamperStore{entry: -1, tileLevel: 0, tileIndex: 2, at: (755-512)*32 + 5}, true},
		"tile-level1":                  {&tamperStore{entry: -1, tileLevel: 1, tileIndex: 0, at: 33}, true},
		"checkpoint":                   {&tamperStore{entry: -1, tileLevel: -1, cp: true, at: 30}, true},
		"checkpoint-signature":         {&tamperStore{entry: -1, tileLevel: -1, cp: true, at: -2}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ts := c.ts
			ts.Store = s
			if ts.at < 0 {
				st, _ := s.State(context.Background())
				ts.at = len(st.Checkpoint) + ts.at
			}
			_, err := ledger.Open(context.Background(), ts, k, ledger.Options{CheckpointInterval: -1, FullCheck: true, Logger: discardLogger()})
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("Open with FullCheck = %v, want a corrupt-store error", err)
			}
			if err := ledger.Check(context.Background(), ts, k); !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("Check = %v, want a corrupt-store error", err)
			}
			if c.recent {
				if _, err := ledger.Open(context.Background(), ts, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()}); !errors.Is(err, ledger.ErrCorrupt) {
					t.Fatalf("Open = %v, want a corrupt-store error", err)
				}
			}
		})
	}
	// Check writes nothing: the entries after the checkpoint stay
	// without a checkpoint.
	before, _ := s.State(context.Background())
	if err := ledger.Check(context.Background(), s, k); err != nil {
		t.Fatalf("Check of the untouched store: %v", err)
	}
	if after, _ := s.State(context.Background()); after.CheckpointSize != before.CheckpointSize || after.Size != before.Size {
		t.Fatalf("Check changed the store's state from %+v to %+v", before, after)
	}
	// A checkpoint signed by another key is not this log's: refused
	// naming the key, not as corruption (it may be a key rotated without
	// its previous key listed; see Rotate).
	if _, err := ledger.Open(context.Background(), s, testKey(t), ledger.Options{CheckpointInterval: -1, Logger: discardLogger()}); !errors.As(err, new(*ledger.UnknownKeyError)) || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("other key: %v", err)
	}
	l2, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("untouched store: %v", err)
	}
	if l2.Size() != 760 {
		t.Errorf("size %d, want 760 (entries after the checkpoint are kept)", l2.Size())
	}
	l2.Close()
}

// lostCheckpointStore has lost its checkpoints: its entries are all there.
type lostCheckpointStore struct{ ledger.Store }

func (s lostCheckpointStore) State(ctx context.Context) (ledger.State, error) {
	st, err := s.Store.State(ctx)
	return ledger.State{Size: st.Size}, err
}

// A store with entries but no signed checkpoint lost its latest one (a
// log signs the empty tree's first): Open and Check refuse it, saying so
// and what to do, rather than sign a tree that may fork the log. An empty
// store without one is a new log.
func TestOpenRefusesEntriesWithoutCheckpoint(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	appendN(t, l, 0, 30)
	l.Close()
	lost := lostCheckpointStore{s}
	_, err := ledger.Open(t.Context(), lost, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Open of 30 entries without a checkpoint = %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"holds 30 entries but no signed checkpoint", "was lost", "restore the store, or at least its latest checkpoint, from a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open's error %q does not say %q", err, want)
		}
	}
	if err := ledger.Check(t.Context(), lost, k); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Check of 30 entries without a checkpoint = %v, want ErrCorrupt", err)
	}
	if st, _ := s.State(t.Context()); st.CheckpointSize != 30 || st.Size != 30 {
		t.Errorf("the refused Open changed the store: %+v", st)
	}
	l, err = ledger.Open(t.Context(), lostCheckpointStore{memory.New()}, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open of an empty store without a checkpoint: %v", err)
	}
	l.Close()
}

// wrongLeafStore's leaf-hash index is damaged: it gives every leaf hash
// the index after the right one.
type wrongLeafStore struct{ ledger.Store }

func (s wrongLeafStore) IndexOf(ctx context.Context, h [ledger.HashSize]byte) (uint64, error) {
	i, err := s.Store.IndexOf(ctx, h)
	return i + 1, err
}

// A leaf-hash index that names another entry than the tree holds under
// the leaf hash is damage: the proof would be another entry's.
func TestInclusionProofByHashChecksTheIndex(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	receipts := appendN(t, l, 0, 20)
	l.Close()
	l, err := ledger.Open(t.Context(), wrongLeafStore{s}, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = l.InclusionProofByHash(t.Context(), receipts[3].LeafHash, 20)
	if !errors.Is(err, ledger.ErrCorrupt) || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("InclusionProofByHash with a leaf-hash index giving the wrong entry: %v; want ErrCorrupt", err)
	}
}
