package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// plainStore hides a store's snapshots: a ledger on it reads every entry.
type plainStore struct{ ledger.Store }

// logBuffer collects a ledger's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// randomApprovalLog appends steps random records of the approval
// lifecycle to a ledger on s (on which newApprovalLog appended the
// config): requests, plain decisions, verdicts (some by the principal,
// some after the deadline), consumptions (some twice, some with other
// terms, some late), outcomes, and a new approval_config now and then.
// Many are refused, as they would be in life; those append nothing. It
// returns the ids of the approvals opened.
func randomApprovalLog(t *testing.T, a *approvalLog, rng *rand.Rand, steps int) []commit.Digest {
	t.Helper()
	var ids []commit.Digest
	type consumed struct {
		id    commit.Digest
		index uint64
	}
	var consumptions []consumed
	now := a.clock.now()
	rec := requestRecord(t)
	other := rec
	other.Action = "other_action"
	for range steps {
		now = now.Add(time.Duration(rng.IntN(90)) * time.Minute) // past the execution TTL at times
		if rng.IntN(40) == 0 {
			now = now.Add(pendingTTL) // past the pending deadline
		}
		pick := func() commit.Digest { return ids[rng.IntN(len(ids))] }
		switch op := rng.IntN(10); {
		case op < 2 || len(ids) == 0:
			id, _ := a.request(now, rec)
			ids = append(ids, id)
		case op == 2:
			if _, err := a.append(now, testRecord(t, rng.IntN(1000))); err != nil {
				t.Fatal(err)
			}
		case op < 5:
			approver, v := "alice", entry.Approve
			if rng.IntN(4) == 0 {
				v = entry.Reject
			}
			if rng.IntN(10) == 0 {
				approver = rec.Principal // refused: self-approval
			}
			a.verdict(now, pick(), approver, v)
		case op < 7:
			id, r := pick(), rec
			if rng.IntN(6) == 0 {
				r = other // refused: another action
			}
			if got, err := a.append(now, consumption(id, r)); err == nil {
				consumptions = append(consumptions, consumed{id, got.Index})
			}
		case op < 9 && len(consumptions) > 0:
			c := consumptions[rng.IntN(len(consumptions))]
			result := []entry.Result{entry.Succeeded, entry.Failed, entry.Unknown}[rng.IntN(3)]
			a.append(now, ledger.Record{Kind: entry.KindOutcome, ApprovalID: c.id, Consumption: c.index,
				Mediator: rec.Mediator, Result: result})
		case op == 9 && rng.IntN(5) == 0:
			ttl := time.Duration(1+rng.IntN(48)) * time.Hour
			if _, err := a.append(now, ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: ttl, ExecutionTTL: ttl / 2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

// stateOf is the approval state of l, encoded: two ledgers with the same
// encoding give the same answers (Approval, PendingApprovals,
// ApprovalConfig, and every refusal of the lifecycle's rules).
func stateOf(l *ledger.Ledger) []byte {
	s, refused := l.ApprovalState()
	return s.EncodeSnapshot(l.Size(), make([]byte, ledger.HashSize), refused)
}

// fullScan is the approval state of the first size entries of store,
// read from every entry, encoded as stateOf.
func fullScan(t *testing.T, store ledger.Store, size uint64) []byte {
	t.Helper()
	s, refused, err := ledger.RebuildApprovals(t.Context(), store, size)
	if err != nil {
		t.Fatal(err)
	}
	return s.EncodeSnapshot(size, make([]byte, ledger.HashSize), refused)
}

// putSnapshotAt stores the snapshot of the first size entries of store,
// made from a full scan as the ledger makes one from the log.
func putSnapshotAt(t *testing.T, store *memory.Store, size uint64) {
	t.Helper()
	s, refused, err := ledger.RebuildApprovals(t.Context(), store, size)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ledger.RootFromTiles(t.Context(), store, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutSnapshot(t.Context(), size, s.EncodeSnapshot(size, root, refused)); err != nil {
		t.Fatal(err)
	}
}

// Property: a ledger opened on a snapshot at any size S and the entries
// after it has the approval state of one that reads every entry, and
// answers every question about approvals alike.
func TestApprovalSnapshotEquivalence(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 17))
		store := memory.New()
		a := newApprovalLog(t, store)
		ids := randomApprovalLog(t, a, rng, 400)
		a.l.StopSequencer() // no snapshot at Close
		size := a.l.Size()
		want := fullScan(t, store, size)
		sizes := []uint64{0, 1, size / 2, size - 1, size}
		for range 6 {
			sizes = append(sizes, uint64(rng.IntN(int(size)+1)))
		}
		for _, at := range sizes {
			putSnapshotAt(t, store, at)
			l, err := ledger.Open(t.Context(), store, a.k, ledger.Options{CheckpointInterval: -1, Now: a.clock.now, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			full, err := ledger.Open(t.Context(), plainStore{store}, a.k, ledger.Options{CheckpointInterval: -1, Now: a.clock.now, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if got := l.SnapshotSize(); got != at {
				t.Fatalf("seed %d: Open used the snapshot at %d, want %d", seed, got, at)
			}
			if got := stateOf(l); !bytes.Equal(got, want) {
				t.Fatalf("seed %d, snapshot at %d of %d: the state differs from a full scan's", seed, at, size)
			}
			for _, id := range ids {
				st1, ok1 := l.Approval(id)
				st2, ok2 := full.Approval(id)
				if ok1 != ok2 || st1 != st2 {
					t.Fatalf("seed %d, snapshot at %d: Approval(%x) = %+v, %v; a full scan says %+v, %v", seed, at, id[:4], st1, ok1, st2, ok2)
				}
			}
			now := a.clock.now()
			if p1, p2 := l.PendingApprovals(now), full.PendingApprovals(now); len(p1) != len(p2) {
				t.Fatalf("seed %d, snapshot at %d: %d pending, a full scan says %d", seed, at, len(p1), len(p2))
			}
			p1, e1, ok1 := l.ApprovalConfig()
			p2, e2, ok2 := full.ApprovalConfig()
			if p1 != p2 || e1 != e2 || ok1 != ok2 {
				t.Fatalf("seed %d, snapshot at %d: config %v %v %v, a full scan says %v %v %v", seed, at, p1, e1, ok1, p2, e2, ok2)
			}
			l.StopSequencer()
			full.StopSequencer()
		}
	}
}

// The lifecycle's rules hold across a restart that reads the snapshot
// Close wrote: a consumed approval stays consumed, an expired one
// expired, a denied one denied, a pending one can be decided once.
func TestApprovalSnapshotAcrossRestart(t *testing.T) {
	for _, s := range testStores {
		t.Run(s.name, func(t *testing.T) { testApprovalSnapshotAcrossRestart(t, s.open(t)) })
	}
}

func testApprovalSnapshotAcrossRestart(t *testing.T, store ledger.Store) {
	if _, ok := store.(ledger.SnapshotStore); !ok {
		t.Fatalf("%T keeps no approval snapshot", store)
	}
	a := newApprovalLog(t, store)
	rec := requestRecord(t)
	t1 := a.base()
	expiring := a.approved(t1, rec) // approved at t1+1s: entry times never go back
	consumed := a.approved(t1, rec)
	r, err := a.append(t1.Add(2*time.Second), consumption(consumed, rec))
	wantOK(t, "consumption", err)
	denied, _ := a.request(t1, rec)
	_, err = a.verdict(t1.Add(time.Second), denied, "alice", entry.Reject)
	wantOK(t, "deny", err)
	pending, _ := a.request(t1.Add(3*time.Second), rec)
	_, err = a.append(t1.Add(4*time.Second), ledger.Record{Kind: entry.KindOutcome, ApprovalID: consumed, Consumption: r.Index,
		Mediator: rec.Mediator, Result: entry.Succeeded})
	wantOK(t, "outcome", err)

	a.reopen()
	if got, want := a.l.SnapshotSize(), a.l.Size(); got != want {
		t.Fatalf("Open read the snapshot at %d, want the one Close wrote at %d", got, want)
	}
	t2 := t1.Add(10 * time.Second)
	_, err = a.append(t2, consumption(consumed, rec))
	wantRefusal(t, "a second consumption after the restart", err, ledger.CodeConsumed, "")
	_, err = a.append(t2, ledger.Record{Kind: entry.KindOutcome, ApprovalID: consumed, Consumption: r.Index,
		Mediator: rec.Mediator, Result: entry.Failed})
	wantRefusal(t, "an outcome after the final one", err, ledger.CodeOutcomeFinal, "")
	_, err = a.append(t2, consumption(denied, rec))
	wantRefusal(t, "consuming a denied approval", err, ledger.CodeDenied, "")
	_, err = a.append(t1.Add(time.Second+executionTTL), consumption(expiring, rec))
	wantRefusal(t, "consuming at the execution deadline", err, ledger.CodeExpired, "")
	_, err = a.verdict(t1.Add(time.Second+executionTTL), pending, "alice", entry.Approve)
	wantOK(t, "deciding the pending approval after the restart", err)
	_, err = a.verdict(t1.Add(time.Second+executionTTL), pending, "bob", entry.Approve)
	wantRefusal(t, "deciding it twice", err, ledger.CodeDecided, "")
}

// A snapshot that cannot be trusted is not used: Open logs why and reads
// every entry, and the state is a full scan's.
func TestApprovalSnapshotIgnored(t *testing.T) {
	store := memory.New()
	a := newApprovalLog(t, store)
	randomApprovalLog(t, a, rand.New(rand.NewPCG(7, 7)), 120)
	a.l.StopSequencer()
	size := a.l.Size()
	want := fullScan(t, store, size)
	s, refused, err := ledger.RebuildApprovals(t.Context(), store, size-10)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ledger.RootFromTiles(t.Context(), store, size-10)
	if err != nil {
		t.Fatal(err)
	}
	good := s.EncodeSnapshot(size-10, root, refused)
	resum := func(b []byte) []byte {
		sum := sha256.Sum256(b[:len(b)-sha256.Size])
		return append(b[:len(b)-sha256.Size:len(b)-sha256.Size], sum[:]...)
	}
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x40
		return b
	}
	for _, c := range []struct {
		name string
		size uint64 // stored as
		snap []byte
		why  string
	}{
		{"flipped byte", size - 10, flip(len(good) / 2), "damaged"},
		{"flipped checksum", size - 10, flip(len(good) - 1), "damaged"},
		{"truncated", size - 10, good[:len(good)-40], "damaged"},
		{"empty", size - 10, []byte{}, "damaged"},
		{"newer format", size - 10, resum(func() []byte { b := bytes.Clone(good); b[17] = 3; return b }()), "newer format"},
		{"stored under another size", size - 11, good, "damaged"},
		{"beyond the store", size + 5, func() []byte {
			b := bytes.Clone(good)
			binary.BigEndian.PutUint64(b[18:], size+5)
			return resum(b)
		}(), "beyond the store"},
		{"another log", size - 10, s.EncodeSnapshot(size-10, make([]byte, ledger.HashSize), refused), "another log"},
		{"an approval past its size", size - 10, resum(func() []byte {
			// The first open approval's request index, past the snapshot.
			b := bytes.Clone(good)
			count := 17 + 1 + 8 + 32 + 8 + 1 + 8 + 8 + 8 + 1 + 8 + 8
			if binary.BigEndian.Uint64(b[count:]) == 0 {
				t.Fatal("the snapshot has no open approval")
			}
			binary.BigEndian.PutUint64(b[count+8+32:], size)
			return b
		}()), "damaged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs logBuffer
			fake := &fakeSnapshot{SnapshotStore: store, size: c.size, snap: c.snap}
			l, err := ledger.Open(t.Context(), fake, a.k, ledger.Options{CheckpointInterval: -1, Now: a.clock.now,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.StopSequencer()
			if got := stateOf(l); !bytes.Equal(got, want) {
				t.Errorf("the state differs from a full scan's")
			}
			if l.SnapshotSize() != 0 {
				t.Errorf("Open used the snapshot at %d", l.SnapshotSize())
			}
			if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "approval snapshot is not used") || !strings.Contains(out, c.why) {
				t.Errorf("Open did not warn that the snapshot is %s:\n%s", c.why, out)
			}
		})
	}
	// The good one is used.
	fake := &fakeSnapshot{SnapshotStore: store, size: size - 10, snap: good}
	l, err := ledger.Open(t.Context(), fake, a.k, ledger.Options{CheckpointInterval: -1, Now: a.clock.now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.StopSequencer()
	if l.SnapshotSize() != size-10 || !bytes.Equal(stateOf(l), want) {
		t.Errorf("the good snapshot: used at %d, state equal %v", l.SnapshotSize(), bytes.Equal(stateOf(l), want))
	}
}

// fakeSnapshot serves a snapshot of the test's making.
type fakeSnapshot struct {
	ledger.SnapshotStore
	size uint64
	snap []byte
}

func (s *fakeSnapshot) Snapshot(context.Context) (uint64, []byte, error) {
	return s.size, bytes.Clone(s.snap), nil
}

// The ledger writes a snapshot in the background each time the durable
// tree has grown by the interval, and a crash (no Close) then costs only
// the entries after the latest one.
func TestApprovalSnapshotPeriodic(t *testing.T) {
	store := memory.New()
	k := testKey(t)
	clock := &testClock{t: t0}
	opts := ledger.WithSnapshots(ledger.Options{CheckpointInterval: -1, Now: clock.now, Logger: discardLogger()}, 50, time.Millisecond)
	l, err := ledger.Open(t.Context(), store, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	a := &approvalLog{t: t, l: l, k: k, clock: clock, store: store}
	if _, err := l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}); err != nil {
		t.Fatal(err)
	}
	randomApprovalLog(t, a, rand.New(rand.NewPCG(3, 3)), 300)
	size := l.Size()
	deadline := time.Now().Add(10 * time.Second)
	var at uint64
	for {
		n, b, err := store.Snapshot(t.Context())
		if err == nil && n+50 > size {
			at = n
			if _, _, _, _, err := ledger.DecodeSnapshot(b); err != nil {
				t.Fatalf("the snapshot written at %d: %v", n, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot within 50 entries of %d after 10 s (latest: %d, %v)", size, n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.StopSequencer() // a crash: no snapshot at Close
	l2, err := ledger.Open(t.Context(), store, k, ledger.Options{CheckpointInterval: -1, Now: clock.now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.SnapshotSize() != at {
		t.Errorf("Open read the snapshot at %d, want %d", l2.SnapshotSize(), at)
	}
	if !bytes.Equal(stateOf(l2), fullScan(t, store, size)) {
		t.Error("the state differs from a full scan's")
	}
}

// A ledger stopped by a storage failure writes no snapshot at Close: its
// state may hold entries that never became durable.
func TestApprovalSnapshotNotAfterFailure(t *testing.T) {
	store := memory.New()
	fs := &failingSnapshotStore{SnapshotStore: store}
	a := newApprovalLog(t, fs)
	rec := requestRecord(t)
	id := a.approved(a.base(), rec)
	fs.fail.Store(true)
	if _, err := a.append(a.clock.now().Add(time.Second), consumption(id, rec)); err == nil {
		t.Fatal("the consumption was acknowledged by a failing store")
	}
	a.l.Close()
	if _, _, err := store.Snapshot(t.Context()); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a snapshot was written after the failure: %v", err)
	}
	fs.fail.Store(false)
	a.open()
	_, err := a.append(a.clock.now().Add(time.Second), consumption(id, rec))
	wantOK(t, "the consumption again, after the restart", err)
}

// failingSnapshotStore fails every Commit while fail is set.
type failingSnapshotStore struct {
	ledger.SnapshotStore
	fail atomic.Bool
}

func (s *failingSnapshotStore) Commit(ctx context.Context, b ledger.Batch) error {
	if s.fail.Load() {
		return errors.New("disk on fire")
	}
	return s.SnapshotStore.Commit(ctx, b)
}

// Open reads a version 1 snapshot, written before closed approvals were
// reduced: it uses it, and the ledger reports every approval and answers
// every later entry as one that read every entry.
func TestApprovalSnapshotVersion1(t *testing.T) {
	// The same log twice (the key, the clock and the steps are the
	// same): one opened on the snapshot, one reading every entry, each
	// appending to its own store.
	stores := []*memory.Store{memory.New(), memory.New()}
	a := newApprovalLog(t, stores[0])
	ids := randomApprovalLog(t, a, rand.New(rand.NewPCG(1, 5)), 120)
	a.l.StopSequencer()
	b := &approvalLog{t: t, k: a.k, clock: &testClock{t: t0}, store: stores[1]}
	b.open()
	if _, err := b.l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}); err != nil {
		t.Fatal(err)
	}
	randomApprovalLog(t, b, rand.New(rand.NewPCG(1, 5)), 120)
	b.l.StopSequencer()
	store := stores[0]
	size := a.l.Size()
	if r1, r2 := rootOf(t, stores[0], size), rootOf(t, stores[1], size); !bytes.Equal(r1, r2) {
		t.Fatal("the two logs differ")
	}
	at := size - 20
	v1, err := ledger.SnapshotV1Of(t.Context(), store, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutSnapshot(t.Context(), at, v1); err != nil {
		t.Fatal(err)
	}
	opts := ledger.Options{CheckpointInterval: -1, Now: a.clock.now, Logger: discardLogger()}
	l, err := ledger.Open(t.Context(), store, a.k, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.StopSequencer()
	full, err := ledger.Open(t.Context(), plainStore{stores[1]}, a.k, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer full.StopSequencer()
	if got := l.SnapshotSize(); got != at {
		t.Fatalf("Open used the snapshot at %d, want the version 1 one at %d", got, at)
	}
	same := func(when string) {
		t.Helper()
		for _, id := range ids {
			st1, ok1, err1 := l.ReadApproval(t.Context(), id)
			st2, ok2, err2 := full.ReadApproval(t.Context(), id)
			st1.Reduced, st2.Reduced = false, false
			if err1 != nil || err2 != nil || ok1 != ok2 || st1 != st2 {
				t.Fatalf("%s: ReadApproval(%x) = %+v, %v, %v; a full scan says %+v, %v, %v", when, id[:4], st1, ok1, err1, st2, ok2, err2)
			}
		}
		now := a.clock.now()
		if p1, p2 := l.PendingApprovals(now), full.PendingApprovals(now); len(p1) != len(p2) {
			t.Fatalf("%s: %d pending, a full scan says %d", when, len(p1), len(p2))
		}
	}
	same("opened")
	// Every later entry gets the same answer from both.
	rec := requestRecord(t)
	now := a.clock.now().Add(time.Minute)
	a.clock.set(now)
	appended := 0
	for _, id := range ids {
		for _, r := range []ledger.Record{
			{Kind: entry.KindApproval, ApprovalID: id, Approver: "alice", Verdict: entry.Approve, PreviewDigest: sha256.Sum256(nil)},
			consumption(id, rec),
		} {
			_, err1 := l.Append(t.Context(), r)
			_, err2 := full.Append(t.Context(), r)
			if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
				t.Fatalf("%s of %x: %v; a full scan says %v", r.Kind, id[:4], err1, err2)
			}
			if err1 == nil {
				appended++
			}
		}
	}
	if appended == 0 || appended == 2*len(ids) {
		t.Fatalf("%d of %d later entries appended: the test checks too little", appended, 2*len(ids))
	}
	same("after more entries")
}

// rootOf is the root of the first size entries of store.
func rootOf(t *testing.T, store ledger.Store, size uint64) []byte {
	t.Helper()
	root, err := ledger.RootFromTiles(t.Context(), store, size)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// countingSnapshots counts PutSnapshot calls.
type countingSnapshots struct {
	ledger.SnapshotStore
	puts atomic.Int64
}

func (s *countingSnapshots) PutSnapshot(ctx context.Context, size uint64, snap []byte) error {
	s.puts.Add(1)
	return s.SnapshotStore.PutSnapshot(ctx, size, snap)
}

// A log without approvals gets no snapshot at Close (a ledgerd without
// approvals configured, every sequencer's term in a cluster): it would
// record an empty state and save the next open a few entries; once the
// log holds approval entries (here an approval_config), Close writes one.
func TestApprovalSnapshotNoneWithoutApprovals(t *testing.T) {
	store := &countingSnapshots{SnapshotStore: memory.New()}
	k := testKey(t)
	open := func() *ledger.Ledger {
		l, err := ledger.Open(t.Context(), store, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	for i := range 20 {
		if _, err := l.Append(t.Context(), testRecord(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := store.puts.Load(); n != 0 {
		n, _, err := store.Snapshot(t.Context())
		t.Fatalf("Close of a log without approvals wrote a snapshot (%d, %v)", n, err)
	}
	l = open()
	if _, err := l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := store.Snapshot(t.Context()); err != nil || n != 21 || store.puts.Load() != 1 {
		t.Fatalf("after an approval_config, Close wrote %d snapshots, the stored one at %d (%v); want one at 21", store.puts.Load(), n, err)
	}
}
