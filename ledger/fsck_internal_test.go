package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// forgeLog writes n entries to a new memory store as the ledger would,
// each signed by signer(i) and timed at(i), with a consistent chain, tiles
// and a checkpoint of the whole tree signed by cpKeys: a log only a bug or
// the holder of the keys could write, whose damage only fsck's chain checks
// can see.
func forgeLog(t *testing.T, n int, signer func(i int) *Key, at func(i int) time.Time, cpKeys ...*Key) *forgedStore {
	t.Helper()
	s := &forgedStore{tiles: map[tileID][]byte{}, cps: map[uint64][]byte{}}
	e := newEdge()
	var prev commit.Digest
	batch := Batch{}
	for i := range n {
		k := signer(i)
		c, _ := commit.Params([]byte(`{"to":"a@example.com"}`))
		en := &entry.Entry{Origin: k.Name(), Index: uint64(i), Time: at(i).UTC(), Mediator: "mediator-1", Principal: "agent-1",
			Action: "send_email", Decision: entry.Allow, Policies: []string{"p"}, Params: c, Tiers: sha256.Sum256(nil),
			Attributes: []byte(`{}`), Prev: prev, KeyID: k.ID()}
		m, err := en.SignedMessage()
		if err != nil {
			t.Fatal(err)
		}
		prev = sha256.Sum256(m)
		b, err := entry.SignedEntry(m, k.Sign(m))
		if err != nil {
			t.Fatal(err)
		}
		batch.Entries = append(batch.Entries, b)
		batch.LeafHashes = append(batch.LeafHashes, entry.LeafHash(b))
	}
	tiles, err := e.appendLeaves(batch.LeafHashes)
	if err != nil {
		t.Fatal(err)
	}
	batch.Tiles = tiles
	s.entries = batch.Entries
	for _, tl := range tiles {
		s.tiles[tileID{tl.Level, tl.Index}] = tl.Hashes
	}
	text := log.Checkpoint{Origin: cpKeys[0].Name(), Size: uint64(n), Hash: e.root()}.Marshal()
	var signers []note.Signer
	for _, k := range cpKeys {
		signers = append(signers, k.Signer())
	}
	signed, err := note.Sign(&note.Note{Text: string(text)}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	s.cps[uint64(n)], s.latest = signed, uint64(n)
	return s
}

// forgedStore is a Store of forgeLog's (the stores in storage/ import
// this package: a test inside it cannot use them). It serves reads only.
type forgedStore struct {
	entries [][]byte
	tiles   map[tileID][]byte
	cps     map[uint64][]byte
	latest  uint64
}

func (s *forgedStore) State(context.Context) (State, error) {
	return State{Size: uint64(len(s.entries)), Checkpoint: s.cps[s.latest], CheckpointSize: s.latest}, nil
}
func (s *forgedStore) Commit(context.Context, Batch) error { return errors.New("read-only") }
func (s *forgedStore) Entry(_ context.Context, i uint64) ([]byte, error) {
	if i >= uint64(len(s.entries)) {
		return nil, ErrNotFound
	}
	return s.entries[i], nil
}
func (s *forgedStore) ReadEntries(_ context.Context, start, end uint64, fn func(uint64, []byte) error) error {
	if start > end || end > uint64(len(s.entries)) {
		return ErrNotFound
	}
	for i := start; i < end; i++ {
		if err := fn(i, s.entries[i]); err != nil {
			return err
		}
	}
	return nil
}
func (s *forgedStore) IndexOf(context.Context, [HashSize]byte) (uint64, error) { return 0, ErrNotFound }
func (s *forgedStore) IndexOfKey(context.Context, []byte) (uint64, error)      { return 0, ErrNotFound }
func (s *forgedStore) Tile(_ context.Context, level uint8, index uint64) ([]byte, error) {
	if t, ok := s.tiles[tileID{level, index}]; ok {
		return t, nil
	}
	return nil, ErrNotFound
}
func (s *forgedStore) AddCheckpoint(context.Context, uint64, []byte) error {
	return errors.New("read-only")
}
func (s *forgedStore) Checkpoint(_ context.Context, size uint64) ([]byte, error) {
	if cp, ok := s.cps[size]; ok {
		return cp, nil
	}
	return nil, ErrNotFound
}
func (s *forgedStore) Close() error { return nil }

func fsckKey(t *testing.T) *Key {
	skey, _, err := GenerateKey("ledger.example.com/fsck")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey([]byte(skey), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Damage only the chain shows: a time that goes back, an entry of a key
// between entries of another; and the same logs without it pass.
func TestFsckChainOnly(t *testing.T) {
	ctx := context.Background()
	k, other := fsckKey(t), fsckKey(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	always := func(k *Key) func(int) *Key { return func(int) *Key { return k } }
	steady := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

	s := forgeLog(t, 600, always(k), steady, k)
	if _, err := Fsck(ctx, s, k, FsckOptions{Signatures: true}); err != nil {
		t.Fatalf("a forged log without damage: %v", err)
	}

	back := func(i int) time.Time {
		if i == 400 {
			return t0 // before entry 399
		}
		return steady(i)
	}
	s = forgeLog(t, 600, always(k), back, k)
	rep, err := Fsck(ctx, s, k, FsckOptions{})
	if !errors.Is(err, ErrCorrupt) || len(rep.Damage) != 1 || !strings.Contains(err.Error(), "entry 400: its time 2026-12-01T10:00:00.000000Z is before entry 399's") {
		t.Fatalf("a time that goes back: %v", err)
	}

	// Entry 100 signed by another key, in a log of k: the key check's
	// binary search does not look at it, fsck's scan does.
	mixed := func(i int) *Key {
		if i == 100 {
			return other
		}
		return k
	}
	s = forgeLog(t, 600, mixed, steady, k)
	_, err = Fsck(ctx, s, k, FsckOptions{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "entry 100: it carries key "+other.ID()+", but key "+k.ID()+" signs there") {
		t.Fatalf("an entry of another key among k's: %v", err)
	}
}
