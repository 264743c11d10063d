package witness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/internal/witnesstest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const origin = "ledger.example.com/witness"

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testKey is a new signing key for a test log.
func testKey(t testing.TB) *ledger.Key {
	t.Helper()
	skey, _, err := ledger.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openLog opens a sequencing ledger on store with key, which signs a
// checkpoint only when a test publishes one.
func openLog(t testing.TB, store ledger.Store, key *ledger.Key) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// memoryLog is a new log on a memory store.
func memoryLog(t testing.TB) (*ledger.Ledger, *ledger.Key) {
	t.Helper()
	key := testKey(t)
	return openLog(t, memory.New(), key), key
}

func record(t testing.TB, i int) ledger.Record {
	t.Helper()
	c, err := commit.Params(fmt.Appendf(nil, `{"to":"user%d@example.com","amount_minor":%d}`, i, i))
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Record{
		Mediator: "local", Principal: "agent-1", Action: "make_payment",
		Decision: entry.Allow, Policies: []string{"payments.limit"},
		Params: c, Tiers: sha256.Sum256([]byte("tiers")),
		Attributes: fmt.Appendf(nil, `{"amount_minor":%d,"payee_known":true}`, i),
	}
}

// appendN appends records from to from+n-1, signs a checkpoint and
// returns its size.
func appendN(t testing.TB, l *ledger.Ledger, from, n int) uint64 {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := l.Append(t.Context(), record(t, i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if _, err := l.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, size := l.Checkpoint()
	return size
}

// fakeWitnesses starts n fake witnesses for the log of key, named
// witness-0.example.org, ..., and returns them with the Witnesses that
// name them w0, w1, ...
func fakeWitnesses(t testing.TB, key *ledger.Key, n int) ([]*witnesstest.Witness, []Witness) {
	t.Helper()
	var fws []*witnesstest.Witness
	var ws []Witness
	for i := range n {
		fw := witnesstest.New(t, fmt.Sprintf("witness-%d.example.org", i), key.VerifierKey())
		k, err := verify.ParseWitnessKey(fw.VKey)
		if err != nil {
			t.Fatal(err)
		}
		fws = append(fws, fw)
		ws = append(ws, Witness{Name: fmt.Sprintf("w%d", i), URL: fw.URL, Key: k})
	}
	return fws, ws
}

// unreachable is ws with every URL changed to one that does not answer:
// a Set made from it serves only what it reads.
func unreachable(ws []Witness) []Witness {
	out := append([]Witness(nil), ws...)
	for i := range out {
		out[i].URL = "http://127.0.0.1:1"
	}
	return out
}

// newSet is New(opts) with the tests' timing: backoffs of 20 to 200 ms,
// and an interval of 20 ms unless opts gives one.
func newSet(t testing.TB, opts Options) *Set {
	t.Helper()
	opts.BackoffMin, opts.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	if opts.Interval == 0 {
		opts.Interval = 20 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs s until the test ends, or until the function it returns is
// called.
func run(t testing.TB, s *Set) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	// Before the ledger closes (cleanups run last first).
	t.Cleanup(stop)
	return stop
}

// fileStore is a File in a new directory, for the checkpoints of l.
func fileStore(t testing.TB, l *ledger.Ledger) (*File, string) {
	path := filepath.Join(t.TempDir(), "cosigned-checkpoint")
	return NewFile(path, l.CheckpointAt), path
}

// started is a log on a memory store with n fake witnesses, all needed,
// gathering cosignatures into a File until the test ends.
func started(t testing.TB, n int) (*ledger.Ledger, *Set, []*witnesstest.Witness, Options) {
	t.Helper()
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, n)
	store, _ := fileStore(t, l)
	opts := Options{Witnesses: ws, Log: l, Store: store}
	s := newSet(t, opts)
	run(t, s)
	return l, s, fws, opts
}

func waitUntil(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCosignatures waits until the latest checkpoint, of size, is held
// with n cosignatures, and returns it with them, as ledgerd serves it.
func waitCosignatures(t testing.TB, l *ledger.Ledger, s *Set, size uint64, n int) []byte {
	t.Helper()
	var cp []byte
	waitUntil(t, fmt.Sprintf("%d cosignatures on the checkpoint of size %d", n, size), func() bool {
		latest, latestSize := l.Checkpoint()
		_, got := s.Cosignatures(t.Context(), latestSize)
		cp = s.Cosigned(t.Context(), latest, latestSize)
		return got == n && latestSize == size
	})
	return cp
}

// witnessSnapshot is the named witness's part of s's snapshot.
func witnessSnapshot(t testing.TB, s *Set, name string) WitnessSnapshot {
	t.Helper()
	for _, w := range s.Snapshot().Witnesses {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no witness %s in the snapshot", name)
	return WitnessSnapshot{}
}

// TestWitnessBadCosignature: a witness answering with a cosignature by
// another key than its configured one, or with an invalid signature, gets
// no line in the served checkpoint, and the failure is counted as
// bad_answer.
func TestWitnessBadCosignature(t *testing.T) {
	t.Run("wrong key", func(t *testing.T) {
		testBadCosignature(t, (*witnesstest.Witness).UseOtherKey)
	})
	t.Run("invalid signature", func(t *testing.T) {
		testBadCosignature(t, func(w *witnesstest.Witness) { w.SetFlip(true) })
	})
}

func testBadCosignature(t *testing.T, spoil func(*witnesstest.Witness)) {
	l, s, fws, _ := started(t, 2)
	spoil(fws[1])
	size := appendN(t, l, 0, 5)
	cp := waitCosignatures(t, l, s, size, 1)
	if !bytes.Contains(cp, []byte("— witness-0.example.org ")) || bytes.Contains(cp, []byte("— witness-1.example.org ")) {
		t.Fatalf("served checkpoint:\n%s", cp)
	}
	waitUntil(t, "a bad_answer failure", func() bool { return witnessSnapshot(t, s, "w1").Failures[FailBadAnswer] > 0 })
}

// TestWitnessCosignaturesKept: the latest checkpoint's cosignatures are
// kept in the store's File, and a restart serves them before any witness
// answers; they are ignored once the checkpoint is not the latest.
func TestWitnessCosignaturesKept(t *testing.T) {
	l, key := memoryLog(t)
	_, ws := fakeWitnesses(t, key, 2)
	_, path := fileStore(t, l)
	first := newSet(t, Options{Witnesses: ws, Log: l, Store: NewFile(path, l.CheckpointAt)})
	run(t, first)
	size := appendN(t, l, 0, 5)
	cp := waitCosignatures(t, l, first, size, 2)
	// A second Set over the same log and file, whose witnesses are
	// unreachable: it holds both cosignatures at once.
	waitUntil(t, "the kept file to hold both cosignatures", func() bool {
		s := newSet(t, Options{Witnesses: unreachable(ws), Log: l, Store: NewFile(path, l.CheckpointAt)})
		c, _ := l.Checkpoint()
		return bytes.Equal(s.Cosigned(t.Context(), c, size), cp)
	})
	// A later checkpoint: the kept cosignatures are not for it.
	appendN(t, l, 5, 1)
	s := newSet(t, Options{Witnesses: unreachable(ws), Log: l, Store: NewFile(path, l.CheckpointAt)})
	if _, n := s.Cosignatures(t.Context(), size+1); n != 0 {
		t.Fatalf("%d cosignatures for a checkpoint nobody cosigned", n)
	}
}

// TestWitnessUnreachable: appends are not slowed by a witness that does
// not answer, and its failures are counted. The snapshot says what the
// metrics report: the answering witness's size, no lag and a success
// time; the other's lag and failures of each kind.
func TestWitnessUnreachable(t *testing.T) {
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, 2)
	// Down before the Set starts: started, it could cosign the log's
	// first checkpoint before the witness goes down, and have a success.
	fws[1].Close()
	store, _ := fileStore(t, l)
	s := newSet(t, Options{Witnesses: ws, Log: l, Store: store})
	run(t, s)
	start := time.Now()
	size := appendN(t, l, 0, 20)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("20 appends took %v with a witness down", d)
	}
	waitCosignatures(t, l, s, size, 1)
	waitUntil(t, "unreachable failures for w1", func() bool { return witnessSnapshot(t, s, "w1").Failures[FailUnreachable] > 0 })
	snap := s.Snapshot()
	if snap.Needed != 2 || snap.Size != size || snap.Held != 1 || snap.Following || len(snap.Witnesses) != 2 {
		t.Fatalf("snapshot %+v; want 2 needed (the default: all), size %d, 1 held, 2 witnesses", snap, size)
	}
	w0, w1 := snap.Witnesses[0], snap.Witnesses[1]
	if w0.Name != "w0" || w0.Cosigned != size || w0.Lag != 0 || w0.LastSuccess.IsZero() || w0.Failures[FailUnreachable] != 0 {
		t.Errorf("the answering witness's snapshot: %+v", w0)
	}
	if w1.Name != "w1" || w1.Cosigned != 0 || w1.Lag != size || !w1.LastSuccess.IsZero() {
		t.Errorf("the unreachable witness's snapshot: %+v", w1)
	}
	for _, w := range snap.Witnesses {
		if len(w.Failures) != len(FailureKinds()) {
			t.Errorf("%s's failures %v: want every kind of %v", w.Name, w.Failures, FailureKinds())
		}
	}
}

// TestWitnessInterval: however often the log signs, a witness is sent at
// most one checkpoint per Interval, the latest, and it is cosigned in the
// end. Every cosigned submission started after start and before the count
// is read, at least the interval apart, so there are at most (that time /
// interval) + 1 of them, on a machine however loaded.
func TestWitnessInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	start := time.Now()
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, 1)
	s := newSet(t, Options{Witnesses: ws, Log: l, Interval: interval})
	run(t, s)
	// Sign a checkpoint after every append, for at least a second and
	// three times as many checkpoints as the witness may cosign.
	var size uint64
	for i := 0; ; i++ {
		size = appendN(t, l, i, 1)
		elapsed := time.Since(start)
		if elapsed >= time.Second && size >= 3*uint64(elapsed/interval+1) {
			break
		}
		if elapsed > 20*time.Second {
			t.Fatalf("only %d checkpoints signed in %v", size, elapsed)
		}
	}
	accepted := fws[0].Stats().Accepted
	elapsed := time.Since(start)
	if most := int(elapsed/interval) + 1; accepted > most {
		t.Errorf("the witness cosigned %d of %d checkpoints in %v; at most %d with an interval of %v", accepted, size+1, elapsed, most, interval)
	}
	waitCosignatures(t, l, s, size, 1)
	t.Logf("%d checkpoints, %d cosigned in %v", size+1, accepted, elapsed)
}

// TestWitnessForkedMetrics: a witness that cosigned another history of
// the log's origin (a forked store, the same key) answers 409 with its
// size, and then refuses the proof from that size: the witness's
// cosigned size reports only sizes cosigned for this log's history, none
// here, and the lag the whole log, not the other history's size.
func TestWitnessForkedMetrics(t *testing.T) {
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, 1)
	// The other history: size 3, another root.
	fws[0].SetTree(3, bytes.Repeat([]byte{0x42}, 32))
	s := newSet(t, Options{Witnesses: ws, Log: l})
	run(t, s)
	size := appendN(t, l, 0, 5)
	waitUntil(t, "a bad_proof failure", func() bool { return witnessSnapshot(t, s, "w0").Failures[FailBadProof] > 0 })
	if w := witnessSnapshot(t, s, "w0"); w.Cosigned != 0 || w.Lag != size {
		t.Errorf("the witness's cosigned size %d and lag %d; want 0 and %d", w.Cosigned, w.Lag, size)
	}
	if st := fws[0].Stats(); st.Accepted != 0 || st.Conflicts == 0 {
		t.Errorf("the witness cosigned %d checkpoints and answered %d conflicts, want none and some", st.Accepted, st.Conflicts)
	}
}

// TestSubmitFork: Submit sends one submission, as Run does: to a witness
// that cosigned another history, the first "old 0" gets a conflict (409
// with its size), the next, with a proof from that size, is refused
// (422); neither is cosigned, and neither counts among the failures.
func TestSubmitFork(t *testing.T) {
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, 1)
	fws[0].SetTree(3, bytes.Repeat([]byte{0x42}, 32))
	size := appendN(t, l, 0, 5)
	s := newSet(t, Options{Witnesses: ws, Log: l})
	cp, _ := l.Checkpoint()
	for _, want := range []string{FailConflict, FailBadProof} {
		err := s.Submit(t.Context(), "w0", cp, size)
		var se *SubmitError
		if !errors.As(err, &se) || se.Kind != want || se.Witness != "w0" {
			t.Fatalf("Submit: %v; want a %s SubmitError", err, want)
		}
	}
	if _, n := s.Cosignatures(t.Context(), size); n != 0 {
		t.Errorf("%d cosignatures of the fork", n)
	}
	if w := witnessSnapshot(t, s, "w0"); w.Failures[FailConflict] != 0 || w.Failures[FailBadProof] != 0 {
		t.Errorf("Submit's failures counted: %v", w.Failures)
	}
	if err := s.Submit(t.Context(), "w9", cp, size); err == nil || !strings.Contains(err.Error(), `no witness named "w9"`) {
		t.Errorf("Submit to an unknown witness: %v", err)
	}
	// The witness back on this history: cosigned.
	fws[0].SetTree(0, nil)
	waitUntil(t, "a cosignature by Submit", func() bool {
		err := s.Submit(t.Context(), "w0", cp, size)
		_, n := s.Cosignatures(t.Context(), size)
		return err == nil && n == 1
	})
}

// TestNewRefuses: options New cannot work with are refused, naming what
// is wrong.
func TestNewRefuses(t *testing.T) {
	l, key := memoryLog(t)
	_, ws := fakeWitnesses(t, key, 2)
	with := func(change func(*Options)) Options {
		o := Options{Witnesses: append([]Witness(nil), ws...), Log: l}
		change(&o)
		return o
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{with(func(o *Options) { o.Log = nil }), "no log"},
		{with(func(o *Options) { o.Witnesses = nil }), "no witnesses"},
		{with(func(o *Options) { o.Witnesses[1].Name = "" }), "witnesses[1]: no name"},
		{with(func(o *Options) { o.Witnesses[1].URL = "" }), "witnesses[1] (w1): no URL"},
		{with(func(o *Options) { o.Witnesses[1].Key = nil }), "witnesses[1] (w1): no key"},
		{with(func(o *Options) { o.Witnesses[1].Name = "w0" }), `witnesses[1]: name "w0" is witnesses[0]'s`},
		{with(func(o *Options) { o.Witnesses[1].Key = o.Witnesses[0].Key }), "witnesses[1] (w1): its key is witnesses[0]'s"},
		{with(func(o *Options) { o.Needed = 3 }), "3 cosignatures needed of 2 witnesses"},
		{with(func(o *Options) { o.Needed = -1 }), "-1 cosignatures needed"},
		{with(func(o *Options) { o.Interval = -time.Second }), "negative"},
	} {
		if _, err := New(t.Context(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v; want %q", err, tc.want)
		}
	}
	if _, err := New(t.Context(), with(func(*Options) {})); err != nil {
		t.Errorf("New with good options: %v", err)
	}
}

// A nil Set (no witnesses configured) holds no cosignature and reports
// nothing.
func TestNilSet(t *testing.T) {
	var s *Set
	if b, n := s.Cosignatures(t.Context(), 1); b != nil || n != 0 {
		t.Errorf("a nil Set's Cosignatures: %q, %d", b, n)
	}
	if got := s.Cosigned(t.Context(), []byte("cp\n"), 1); string(got) != "cp\n" {
		t.Errorf("a nil Set's Cosigned: %q", got)
	}
	if snap := s.Snapshot(); len(snap.Witnesses) != 0 {
		t.Errorf("a nil Set's Snapshot: %+v", snap)
	}
}

// TestFollowerRunsNothing: a follower's Set submits nothing: Run returns
// at once, and the witness is never asked.
func TestFollowerRunsNothing(t *testing.T) {
	l, key := memoryLog(t)
	fws, ws := fakeWitnesses(t, key, 1)
	appendN(t, l, 0, 3)
	s := newSet(t, Options{Witnesses: ws, Log: l, Following: true})
	done := make(chan struct{})
	go func() { defer close(done); s.Run(t.Context()) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a follower's Run did not return")
	}
	if st := fws[0].Stats(); st.Requests != 0 {
		t.Errorf("a follower's Set sent %d submissions", st.Requests)
	}
	if snap := s.Snapshot(); !snap.Following {
		t.Errorf("a follower's snapshot: %+v", snap)
	}
}
