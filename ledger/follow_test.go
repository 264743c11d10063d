package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

const followOrigin = "ledger.example.com/follow"

func followKey(t testing.TB) *ledger.Key {
	t.Helper()
	skey, _, err := ledger.GenerateKey(followOrigin)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func followRecord(t testing.TB, principal string, i int) ledger.Record {
	t.Helper()
	c, err := commit.Params(fmt.Appendf(nil, `{"to":"user%d@example.com"}`, i))
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Record{
		Mediator: "mediator-1", Principal: principal, Action: "send_email",
		Decision: entry.Allow, Policies: []string{"mail.allow"},
		Params: c, Tiers: sha256.Sum256([]byte("tiers")),
		Attributes: fmt.Appendf(nil, `{"recipient_domain":"example.org","n":%d}`, i),
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// sequencer opens a sequencing ledger on s and appends n records for
// principal, then publishes a checkpoint.
func sequencer(t testing.TB, s ledger.Store, k *ledger.Key) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(t.Context(), s, k, ledger.Options{CheckpointInterval: -1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func grow(t testing.TB, l *ledger.Ledger, principal string, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(t.Context(), followRecord(t, principal, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func follow(t testing.TB, s ledger.Store, k *ledger.Key, opts ledger.Options) *ledger.Ledger {
	t.Helper()
	if opts.FollowInterval == 0 {
		opts.FollowInterval = -1 // refreshed by the test only
	}
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	l, err := ledger.Follow(t.Context(), s, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readOnlyStore fails the test on any write, so that a follower over it
// is seen to write nothing.
type readOnlyStore struct {
	ledger.Store
	t      testing.TB
	writes atomic.Int64
}

func (s *readOnlyStore) Commit(context.Context, ledger.Batch) error {
	s.writes.Add(1)
	s.t.Error("a follower committed a batch")
	return errors.New("read-only store")
}

func (s *readOnlyStore) AddCheckpoint(context.Context, uint64, []byte) error {
	s.writes.Add(1)
	s.t.Error("a follower added a checkpoint")
	return errors.New("read-only store")
}

// swapStore is a store whose contents the test replaces under a follower.
type swapStore struct {
	ledger.Store
	cur   atomic.Pointer[ledger.Store]
	state func(ledger.State) ledger.State // if set, rewrites State
	// tile, if set, rewrites a tile read.
	tile func(level uint8, index uint64, hashes []byte) []byte
	// down makes tile reads fail, as a lost connection would.
	down atomic.Bool
}

func newSwapStore(s ledger.Store) *swapStore {
	w := &swapStore{}
	w.set(s)
	return w
}

func (w *swapStore) set(s ledger.Store) { w.cur.Store(&s) }
func (w *swapStore) s() ledger.Store    { return *w.cur.Load() }

func (w *swapStore) State(ctx context.Context) (ledger.State, error) {
	st, err := w.s().State(ctx)
	if err == nil && w.state != nil {
		st = w.state(st)
	}
	return st, err
}
func (w *swapStore) Entry(ctx context.Context, i uint64) ([]byte, error) { return w.s().Entry(ctx, i) }
func (w *swapStore) ReadEntries(ctx context.Context, start, end uint64, fn func(uint64, []byte) error) error {
	return w.s().ReadEntries(ctx, start, end, fn)
}
func (w *swapStore) IndexOf(ctx context.Context, h [ledger.HashSize]byte) (uint64, error) {
	return w.s().IndexOf(ctx, h)
}
func (w *swapStore) IndexOfKey(ctx context.Context, k []byte) (uint64, error) {
	return w.s().IndexOfKey(ctx, k)
}
func (w *swapStore) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	if w.down.Load() {
		return nil, errors.New("swapStore: connection reset")
	}
	t, err := w.s().Tile(ctx, level, index)
	if err == nil && w.tile != nil {
		t = w.tile(level, index, t)
	}
	return t, err
}
func (w *swapStore) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	return w.s().Checkpoint(ctx, size)
}
func (w *swapStore) Commit(context.Context, ledger.Batch) error {
	return errors.New("swapStore: a follower committed a batch")
}
func (w *swapStore) AddCheckpoint(context.Context, uint64, []byte) error {
	return errors.New("swapStore: a follower added a checkpoint")
}
func (w *swapStore) Close() error { return nil }

// root opens a signed checkpoint with note and formats/log.
func root(t testing.TB, k *ledger.Key, signed []byte) *log.Checkpoint {
	t.Helper()
	v, err := note.NewVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := log.ParseCheckpoint(signed, k.Name(), v)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return cp
}

// TestFollowReadsEqualSequencer: a follower on the sequencer's store
// serves, after Refresh, what the sequencer serves, and the proofs verify
// with merkle/proof; before Refresh it serves its older view only.
func TestFollowReadsEqualSequencer(t *testing.T) {
	ctx := t.Context()
	k := followKey(t)
	mem := memory.New()
	store := &readOnlyStore{Store: mem, t: t}
	// Followed before the sequencer ever started: an empty view.
	f := follow(t, store, k, ledger.Options{})
	if cp, size := f.Checkpoint(); cp != nil || size != 0 || f.Size() != 0 {
		t.Fatalf("an empty store's follower serves checkpoint %q, size %d", cp, f.Size())
	}
	seq := sequencer(t, mem, k)
	grow(t, seq, "agent-a", 300) // past a full tile
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	cp1, size1 := seq.Checkpoint()
	if got, size := f.Checkpoint(); !bytes.Equal(got, cp1) || size != size1 || f.Size() != size1 {
		t.Fatalf("after Refresh the follower serves size %d (checkpoint %d), the sequencer %d", f.Size(), size, size1)
	}

	grow(t, seq, "agent-b", 260)
	cp2, size2 := seq.Checkpoint()
	// Not refreshed: the old view, and nothing beyond it.
	if got, size := f.Checkpoint(); !bytes.Equal(got, cp1) || size != size1 || f.Size() != size1 {
		t.Fatalf("before Refresh the follower moved to %d", size)
	}
	if _, err := f.Entry(ctx, size1); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("entry %d beyond the view: %v, want ErrNotFound", size1, err)
	}
	if _, err := f.CheckpointAt(ctx, size2); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("checkpoint %d beyond the view: %v, want ErrNotFound", size2, err)
	}
	if _, err := f.InclusionProof(ctx, 0, size2); !errors.Is(err, ledger.ErrSize) {
		t.Errorf("inclusion proof at %d beyond the view: %v, want ErrSize", size2, err)
	}
	stale, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := f.WaitCheckpoint(stale, size2); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitCheckpoint(%d) before the refresh: %v, want the context's end", size2, err)
	}
	waited := make(chan []byte, 1)
	go func() {
		cp, _, err := f.WaitCheckpoint(ctx, size2)
		if err != nil {
			t.Error(err)
		}
		waited <- cp
	}()
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-waited; !bytes.Equal(got, cp2) {
		t.Errorf("WaitCheckpoint returned %q, want the new checkpoint", got)
	}
	if got, size := f.Checkpoint(); !bytes.Equal(got, cp2) || size != size2 || f.Size() != size2 {
		t.Fatalf("after Refresh the follower serves size %d, the sequencer %d", size, size2)
	}
	if f.VerifierKey() != seq.VerifierKey() || !f.ReadOnly() || seq.ReadOnly() {
		t.Error("VerifierKey or ReadOnly differ")
	}

	c1, c2 := root(t, k, cp1), root(t, k, cp2)
	for _, size := range []uint64{size1, size2} {
		a, err1 := seq.CheckpointAt(ctx, size)
		b, err2 := f.CheckpointAt(ctx, size)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("CheckpointAt(%d): %v %v, equal %v", size, err1, err2, bytes.Equal(a, b))
		}
	}
	for i := range size2 {
		e, err := f.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := seq.Entry(ctx, i); !bytes.Equal(e, want) {
			t.Fatalf("entry %d differs", i)
		}
		if i%37 != 0 && i != size2-1 {
			continue
		}
		leaf := rfc6962.DefaultHasher.HashLeaf(e)
		p, err := f.InclusionProof(ctx, i, size2)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size2, leaf, p, c2.Hash); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		index, p2, err := f.InclusionProofByHash(ctx, [ledger.HashSize]byte(leaf), size2)
		if err != nil || index != i || fmt.Sprint(p2) != fmt.Sprint(p) {
			t.Fatalf("InclusionProofByHash of entry %d: index %d, %v", i, index, err)
		}
		want, _ := seq.TlogProof(ctx, i, size2)
		if got, err := f.TlogProof(ctx, i, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("TlogProof of entry %d: %v", i, err)
		}
	}
	p, err := f.ConsistencyProof(ctx, size1, size2)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, p, c1.Hash, c2.Hash); err != nil {
		t.Fatal(err)
	}
	l1, r1, err1 := f.RangeProof(ctx, 10, 400, size2)
	l2, r2, err2 := seq.RangeProof(ctx, 10, 400, size2)
	if err1 != nil || err2 != nil || fmt.Sprint(l1, r1) != fmt.Sprint(l2, r2) {
		t.Errorf("RangeProof differs: %v %v", err1, err2)
	}
	for _, tile := range []struct {
		level uint8
		index uint64
		width int
	}{{0, 0, 256}, {0, 2, 48}, {1, 0, 2}} { // size2 is 560
		a, err1 := f.Tile(ctx, tile.level, tile.index, tile.width)
		b, err2 := seq.Tile(ctx, tile.level, tile.index, tile.width)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("tile %d/%d: %v %v", tile.level, tile.index, err1, err2)
		}
	}
	a, err1 := f.EntryBundle(ctx, 2, int(size2-512))
	b, err2 := seq.EntryBundle(ctx, 2, int(size2-512))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("entry bundle: %v %v", err1, err2)
	}
	var ea, eb bytes.Buffer
	opts := ledger.ExportOptions{ConsistencyFrom: size1}
	if err1, err2 := f.Export(ctx, &ea, 5, 500, opts), seq.Export(ctx, &eb, 5, 500, opts); err1 != nil || err2 != nil || !bytes.Equal(ea.Bytes(), eb.Bytes()) {
		t.Errorf("export: %v %v", err1, err2)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := store.writes.Load(); n != 0 {
		t.Errorf("the follower wrote %d times", n)
	}
}

// TestFollowReadOnly: the writes are refused with ErrReadOnly, and the
// approval state, the sequencer's, is none on a follower.
func TestFollowReadOnly(t *testing.T) {
	ctx := t.Context()
	k := followKey(t)
	mem := memory.New()
	grow(t, sequencer(t, mem, k), "agent-a", 3)
	store := &readOnlyStore{Store: mem, t: t}
	f := follow(t, store, k, ledger.Options{})
	before, _ := mem.State(ctx)
	if _, err := f.Append(ctx, followRecord(t, "agent-a", 9)); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("Append: %v, want ErrReadOnly", err)
	}
	if _, err := f.Publish(ctx); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("Publish: %v, want ErrReadOnly", err)
	}
	if _, ok := f.Approval(commit.Digest{1}); ok {
		t.Error("Approval found one on a follower")
	}
	if _, _, ok := f.ApprovalConfig(); ok {
		t.Error("ApprovalConfig found one on a follower")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := mem.State(ctx); after.Size != before.Size || !bytes.Equal(after.Checkpoint, before.Checkpoint) {
		t.Errorf("the store moved from %d to %d under a follower", before.Size, after.Size)
	}
	if n := store.writes.Load(); n != 0 {
		t.Errorf("the follower wrote %d times", n)
	}
}

// resign signs a checkpoint's text with signer instead.
func resign(t testing.TB, signed []byte, signer note.Signer) []byte {
	t.Helper()
	text, _, _ := bytes.Cut(signed, []byte("\n\n"))
	b, err := note.Sign(&note.Note{Text: string(text) + "\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFollowRefusesDivergence rewrites the store under a follower: a refresh
// that finds another history keeps the view, returns a *FollowError naming
// both states, sets Failure, and every later refresh returns it.
func TestFollowRefusesDivergence(t *testing.T) {
	const n = 40
	k := followKey(t)
	cases := []struct {
		name string
		// rewrite gets the followed store with its sequencer and returns
		// the store that replaces it.
		rewrite func(t *testing.T, mem *memory.Store, seq *ledger.Ledger, w *swapStore) ledger.Store
		want    string
	}{
		{"fork of the same size", func(t *testing.T, _ *memory.Store, _ *ledger.Ledger, _ *swapStore) ledger.Store {
			other := memory.New()
			grow(t, sequencer(t, other, k), "agent-z", n)
			return other
		}, "another checkpoint for tree size 40"},
		{"fork that grew", func(t *testing.T, _ *memory.Store, _ *ledger.Ledger, _ *swapStore) ledger.Store {
			other := memory.New()
			grow(t, sequencer(t, other, k), "agent-z", n+300)
			return other
		}, "at size 40"},
		{"smaller tree", func(t *testing.T, _ *memory.Store, _ *ledger.Ledger, _ *swapStore) ledger.Store {
			other := memory.New()
			grow(t, sequencer(t, other, k), "agent-a", n-5)
			return other
		}, "the tree shrank from 40 to 35"},
		{"checkpoint signed by another key", func(t *testing.T, mem *memory.Store, seq *ledger.Ledger, w *swapStore) ledger.Store {
			// The tree grew as it should; only the signature is wrong.
			grow(t, seq, "agent-a", 10)
			other := followKey(t)
			w.state = func(st ledger.State) ledger.State {
				st.Checkpoint = resign(t, st.Checkpoint, other.Signer())
				return st
			}
			return mem
		}, "is signed by " + followOrigin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			mem := memory.New()
			seq := sequencer(t, mem, k)
			grow(t, seq, "agent-a", n)
			w := newSwapStore(mem)
			f := follow(t, w, k, ledger.Options{})
			cp, size := f.Checkpoint()
			w.set(c.rewrite(t, mem, seq, w))
			err := f.Refresh(ctx)
			fe, ok := errors.AsType[*ledger.FollowError](err)
			if !ok || !errors.Is(err, ledger.ErrDiverged) {
				t.Fatalf("Refresh: %v, want a *FollowError", err)
			}
			if !strings.Contains(err.Error(), c.want) || fe.Size != n || fe.CheckpointSize != n || !bytes.Equal(fe.Root, root(t, k, cp).Hash) {
				t.Errorf("Refresh: %v (%+v), want %q naming the view", err, fe, c.want)
			}
			st, _ := w.State(ctx)
			if fe.StoreSize != st.Size || fe.StoreCheckpointSize != st.CheckpointSize {
				t.Errorf("the error names store size %d/%d, the store has %d/%d", fe.StoreSize, fe.StoreCheckpointSize, st.Size, st.CheckpointSize)
			}
			if got, gotSize := f.Checkpoint(); !bytes.Equal(got, cp) || gotSize != size || f.Size() != size {
				t.Errorf("the view moved to %d", gotSize)
			}
			if !errors.Is(f.Failure(), ledger.ErrDiverged) {
				t.Errorf("Failure: %v", f.Failure())
			}
			// The original store back: still refused.
			w.state = nil
			w.set(mem)
			if err := f.Refresh(ctx); !errors.Is(err, ledger.ErrDiverged) {
				t.Errorf("a later Refresh: %v, want the divergence again", err)
			}
		})
	}
	t.Run("first checkpoint whose root the tiles do not give", func(t *testing.T) {
		// A follower of an empty log has no root to be consistent with:
		// only the tiles vouch for the checkpoint's root.
		mem := memory.New()
		w := newSwapStore(mem)
		f := follow(t, w, k, ledger.Options{})
		grow(t, sequencer(t, mem, k), "agent-a", 5)
		w.tile = func(level uint8, index uint64, t []byte) []byte {
			t[3] ^= 1 // leaf 0
			return t
		}
		if err := f.Refresh(t.Context()); !errors.Is(err, ledger.ErrDiverged) || !strings.Contains(err.Error(), "stored tiles give root") {
			t.Errorf("Refresh: %v, want the tiles' root refused", err)
		}
		if cp, size := f.Checkpoint(); cp != nil || size != 0 || f.Size() != 0 {
			t.Errorf("the view moved to %d", size)
		}
	})
	t.Run("signed tree not consistent with the view", func(t *testing.T) {
		// The view is at 300 entries; the store's checkpoint for 512,
		// signed by the log's key, has the root its tiles give, and the
		// tiles give the view's root at 300 too: but the level-1 tile's
		// second hash is not the root of entries 256 to 511, so the tree of
		// 512 does not extend the tree of 300 (an inclusion proof of entry
		// 299 in it would not verify). Only the consistency proof sees it.
		ctx := t.Context()
		mem := memory.New()
		seq := sequencer(t, mem, k)
		grow(t, seq, "agent-a", 300)
		w := newSwapStore(mem)
		f := follow(t, w, k, ledger.Options{})
		grow(t, seq, "agent-a", 212)
		up, err := mem.Tile(ctx, 1, 0)
		if err != nil || len(up) != 2*ledger.HashSize {
			t.Fatalf("tile 1/0: %d bytes, %v", len(up), err)
		}
		forged := bytes.Clone(up)
		forged[ledger.HashSize] ^= 1
		w.tile = func(level uint8, index uint64, t []byte) []byte {
			if level == 1 && index == 0 {
				return bytes.Clone(forged)
			}
			return t
		}
		h := rfc6962.DefaultHasher
		text := log.Checkpoint{Origin: followOrigin, Size: 512, Hash: h.HashChildren(forged[:ledger.HashSize], forged[ledger.HashSize:])}.Marshal()
		signed, err := note.Sign(&note.Note{Text: string(text)}, k.Signer())
		if err != nil {
			t.Fatal(err)
		}
		w.state = func(st ledger.State) ledger.State {
			st.Checkpoint = signed
			return st
		}
		if err := f.Refresh(ctx); !errors.Is(err, ledger.ErrDiverged) || !strings.Contains(err.Error(), "not consistent with the checkpoint served") {
			t.Errorf("Refresh: %v, want the consistency proof refused", err)
		}
		if _, size := f.Checkpoint(); size != 300 {
			t.Errorf("the view moved to %d", size)
		}
	})
	t.Run("checkpoint signed by another key is ErrRotation", func(t *testing.T) {
		mem := memory.New()
		seq := sequencer(t, mem, k)
		grow(t, seq, "agent-a", 3)
		w := newSwapStore(mem)
		f := follow(t, w, k, ledger.Options{})
		other := followKey(t)
		w.state = func(st ledger.State) ledger.State {
			st.Checkpoint = resign(t, st.Checkpoint, other.Signer())
			return st
		}
		if err := f.Refresh(t.Context()); !errors.Is(err, ledger.ErrRotation) {
			t.Errorf("Refresh: %v, want ErrRotation", err)
		}
	})
}

// TestFollowTransientError: a store that cannot be read (its state, or
// its tiles) is no divergence:
// the refresh fails, the view stays, and the next refresh moves it.
func TestFollowTransientError(t *testing.T) {
	ctx := t.Context()
	k := followKey(t)
	mem := memory.New()
	seq := sequencer(t, mem, k)
	grow(t, seq, "agent-a", 5)
	w := newSwapStore(mem)
	f := follow(t, w, k, ledger.Options{})
	grow(t, seq, "agent-a", 5)
	w.set(mem.Reopen())
	mem.Close()
	down := w.s()
	down.Close() // reads now fail with the store's own error
	if err := f.Refresh(ctx); err == nil || errors.Is(err, ledger.ErrDiverged) || f.Failure() != nil {
		t.Fatalf("Refresh on a closed store: %v (Failure %v), want a plain error", err, f.Failure())
	}
	w.set(mem.Reopen())
	w.down.Store(true)
	if err := f.Refresh(ctx); err == nil || errors.Is(err, ledger.ErrDiverged) || f.Failure() != nil || f.Size() != 5 {
		t.Fatalf("Refresh with tiles unreadable: %v (Failure %v, size %d), want a plain error", err, f.Failure(), f.Size())
	}
	w.down.Store(false)
	if err := f.Refresh(ctx); err != nil || f.Size() != 10 {
		t.Fatalf("Refresh after the store returned: %v, size %d", err, f.Size())
	}
}

// TestFollowConcurrentReaders reads a follower from several goroutines
// while the sequencer appends and the follower refreshes (its own loop
// and explicit calls): every checkpoint read is one the sequencer stored,
// the size is never below it, and every proof for its size verifies.
func TestFollowConcurrentReaders(t *testing.T) {
	ctx := t.Context()
	k := followKey(t)
	mem := memory.New()
	seq := sequencer(t, mem, k)
	f := follow(t, mem, k, ledger.Options{FollowInterval: 1})
	done := make(chan struct{})
	var nreads atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for round := range 30 {
			for i := range 9 {
				if _, err := seq.Append(ctx, followRecord(t, "agent-c", round*9+i)); err != nil {
					t.Error(err)
					return
				}
			}
			if _, err := seq.Publish(ctx); err != nil {
				t.Error(err)
				return
			}
			if err := f.Refresh(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			var prev *log.Checkpoint
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads > 0 {
						return
					}
				default:
				}
				cp, size := f.Checkpoint()
				if f.Size() < size {
					t.Errorf("size %d below the checkpoint's %d", f.Size(), size)
					return
				}
				if stored, err := mem.Checkpoint(ctx, size); err != nil || !bytes.Equal(stored, cp) {
					t.Errorf("checkpoint of size %d is not the one the sequencer stored (%v)", size, err)
					return
				}
				c := root(t, k, cp)
				if c.Size != size {
					t.Errorf("Checkpoint says size %d, its text %d", size, c.Size)
					return
				}
				if size > 0 {
					i := uint64(reads) % size
					e, err := f.Entry(ctx, i)
					if err != nil {
						t.Error(err)
						return
					}
					p, err := f.InclusionProof(ctx, i, size)
					if err == nil {
						err = proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, rfc6962.DefaultHasher.HashLeaf(e), p, c.Hash)
					}
					if err != nil {
						t.Errorf("entry %d in size %d: %v", i, size, err)
						return
					}
				}
				if prev != nil {
					p, err := f.ConsistencyProof(ctx, prev.Size, size)
					if err == nil {
						err = proof.VerifyConsistency(rfc6962.DefaultHasher, prev.Size, size, p, prev.Hash, c.Hash)
					}
					if err != nil {
						t.Errorf("from %d to %d: %v", prev.Size, size, err)
						return
					}
				}
				prev = c
				nreads.Add(1)
				// Yield: four readers that never block would leave the
				// appender, each append a few hand-offs between
				// goroutines, waiting for a time slice at each (5 s for
				// its 270 appends on two cores, 0.5 s yielding).
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	t.Logf("%d reads while the log grew to 270", nreads.Load())
	if _, size := f.Checkpoint(); size != 270 {
		t.Errorf("the follower ended at %d, want 270", size)
	}
}

// blockingStore's State waits for its context to end once armed, as a
// store that lost its server would.
type blockingStore struct {
	ledger.Store
	armed    atomic.Bool
	blocked  chan struct{}
	returned atomic.Bool
}

func (s *blockingStore) State(ctx context.Context) (ledger.State, error) {
	if !s.armed.Load() {
		return s.Store.State(ctx)
	}
	select {
	case s.blocked <- struct{}{}:
	default:
	}
	<-ctx.Done()
	s.returned.Store(true)
	return ledger.State{}, ctx.Err()
}

// TestFollowCloseStopsRefreshing: Close ends a refresh under way and the
// refresh goroutine; none is left.
func TestFollowCloseStopsRefreshing(t *testing.T) {
	k := followKey(t)
	mem := memory.New()
	grow(t, sequencer(t, mem, k), "agent-a", 3)
	s := &blockingStore{Store: mem, blocked: make(chan struct{}, 1)}
	f, err := ledger.Follow(t.Context(), s, k, ledger.Options{FollowInterval: 1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	s.armed.Store(true)
	<-s.blocked // the loop is refreshing, stuck in State
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.returned.Load() {
		t.Error("Close returned before the refresh under way ended")
	}
	// A loop that has called done.Done (this one's, or an earlier test's
	// follower's) is still listed until it has returned, which a busy
	// machine may delay; a loop left running is listed for good.
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); ; {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "ledger.(*Ledger).followLoop") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(stacks, "ledger.(*Ledger).followLoop") {
		t.Errorf("a refresh goroutine is left 5 s after Close:\n%s", stacks)
	}
}

// TestFollowStoreGrowing: the sequencer commits between the follower's
// read of State and its reads of tiles, so a partial tile holds more
// hashes than the tree State reported; Follow and Refresh take the
// tree's prefix of it.
func TestFollowStoreGrowing(t *testing.T) {
	ctx := t.Context()
	k := followKey(t)
	mem := memory.New()
	seq := sequencer(t, mem, k)
	grow(t, seq, "agent-a", 5)
	st5, _ := mem.State(ctx)
	grow(t, seq, "agent-a", 3)
	st8, _ := mem.State(ctx)
	grow(t, seq, "agent-a", 3)
	w := newSwapStore(mem)
	w.state = func(ledger.State) ledger.State { return st5 }
	f := follow(t, w, k, ledger.Options{})
	if _, size := f.Checkpoint(); size != 5 || f.Size() != 5 {
		t.Fatalf("Follow at a state of 5 entries serves %d", size)
	}
	w.state = func(ledger.State) ledger.State { return st8 }
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, size := f.Checkpoint(); size != 8 || f.Size() != 8 {
		t.Fatalf("Refresh to a state of 8 entries serves %d", size)
	}
	w.state = nil
	if err := f.Refresh(ctx); err != nil || f.Size() != 11 {
		t.Fatalf("Refresh: %v, size %d", err, f.Size())
	}
}
