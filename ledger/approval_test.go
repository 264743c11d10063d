package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
)

// testClock is the ledger's clock in these tests: entry times are what
// the test sets, so deadlines are exact.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const (
	pendingTTL   = 24 * time.Hour
	executionTTL = time.Hour
)

// approvalLog is a ledger with an approval_config entry.
type approvalLog struct {
	t     *testing.T
	l     *ledger.Ledger
	k     *ledger.Key
	clock *testClock
	store ledger.Store
}

// testStores are the stores every lifecycle test runs on.
var testStores = []struct {
	name string
	open func(t *testing.T) ledger.Store
}{
	{"mem", func(*testing.T) ledger.Store { return memory.New() }},
	{"badger", func(t *testing.T) ledger.Store {
		s, err := badger.Open(t.Context(), t.TempDir(), badger.Options{Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

func newApprovalLog(t *testing.T, s ledger.Store) *approvalLog {
	t.Helper()
	a := &approvalLog{t: t, k: testKey(t), clock: &testClock{t: t0}, store: s}
	a.open()
	t.Cleanup(func() { a.l.Close() })
	if _, err := a.l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *approvalLog) open() {
	a.t.Helper()
	l, err := ledger.Open(context.Background(), a.store, a.k, ledger.Options{CheckpointInterval: -1, Now: a.clock.now, Logger: discardLogger()})
	if err != nil {
		a.t.Fatal(err)
	}
	a.l = l
}

// reopen closes the ledger and opens it again on the same store.
func (a *approvalLog) reopen() {
	a.t.Helper()
	if err := a.l.Close(); err != nil {
		a.t.Fatal(err)
	}
	a.open()
}

// requestRecord is a needs_approval decision by mediator-1 for agent-1.
func requestRecord(t testing.TB) ledger.Record {
	rec := testRecord(t, 1)
	rec.Decision, rec.Principal = entry.NeedsApproval, "agent-1"
	return rec
}

// consumption is the consumption of id with rec's terms.
func consumption(id commit.Digest, rec ledger.Record) ledger.Record {
	return ledger.Record{Kind: entry.KindConsumption, ApprovalID: id, Mediator: rec.Mediator,
		Principal: rec.Principal, Action: rec.Action, Params: rec.Params}
}

// request appends rec at time at and returns the approval's id.
func (a *approvalLog) request(at time.Time, rec ledger.Record) (commit.Digest, uint64) {
	a.t.Helper()
	a.clock.set(at)
	r, err := a.l.Append(a.t.Context(), rec)
	if err != nil {
		a.t.Fatal(err)
	}
	e, err := entry.Parse(r.Entry)
	if err != nil {
		a.t.Fatal(err)
	}
	id, err := e.Hash()
	if err != nil {
		a.t.Fatal(err)
	}
	return id, r.Index
}

func (a *approvalLog) verdict(at time.Time, id commit.Digest, approver string, v entry.Verdict) (ledger.Receipt, error) {
	a.clock.set(at)
	return a.l.Append(a.t.Context(), ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: approver,
		Verdict: v, PreviewDigest: sha256.Sum256([]byte("preview"))})
}

// approved opens an approval at at and approves it a second later.
func (a *approvalLog) approved(at time.Time, rec ledger.Record) commit.Digest {
	a.t.Helper()
	id, _ := a.request(at, rec)
	if _, err := a.verdict(at.Add(time.Second), id, "alice", entry.Approve); err != nil {
		a.t.Fatal(err)
	}
	return id
}

// base returns a time well after every entry so far: entry times never
// go backwards, so each part of a test starts from its own base.
func (a *approvalLog) base() time.Time {
	return a.clock.now().Add(30 * 24 * time.Hour)
}

func (a *approvalLog) append(at time.Time, rec ledger.Record) (ledger.Receipt, error) {
	a.clock.set(at)
	return a.l.Append(a.t.Context(), rec)
}

// wantRefusal checks that err is the refusal code (term).
func wantRefusal(t *testing.T, what string, err error, code, term string) {
	t.Helper()
	var ae *ledger.ApprovalError
	if !errors.As(err, &ae) || !errors.Is(err, ledger.ErrApproval) || ae.Code != code || ae.Term != term {
		t.Fatalf("%s: got %v, want %s (%s)", what, err, code, term)
	}
}

func wantOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The article's boundaries and every refusal, on each store.
func TestApprovalLifecycle(t *testing.T) {
	for _, s := range testStores {
		t.Run(s.name, func(t *testing.T) {
			a := newApprovalLog(t, s.open(t))
			rec := requestRecord(t)

			t.Run("execution deadline", func(t *testing.T) {
				t0 := a.base()
				id, _ := a.request(t0, rec)
				id2, _ := a.request(t0, rec)
				for _, id := range []commit.Digest{id, id2} {
					_, err := a.verdict(t0.Add(time.Second), id, "alice", entry.Approve)
					wantOK(t, "approve", err)
				}
				approvedAt := t0.Add(time.Second)
				r, err := a.append(approvedAt.Add(executionTTL-time.Millisecond), consumption(id2, rec))
				wantOK(t, "consumption a millisecond before the deadline", err)
				_, err = a.append(approvedAt.Add(executionTTL), consumption(id, rec))
				wantRefusal(t, "consumption at the execution deadline", err, ledger.CodeExpired, "")
				e, _ := entry.Parse(r.Entry)
				st, _ := a.l.Approval(id2)
				if e.Request != st.Request || e.ApprovalID != id2 || e.Version() != entry.Version4 || e.Verify(a.k.ID(), a.k.Public()) != nil {
					t.Errorf("consumption entry: request %d (approval's %d)", e.Request, st.Request)
				}
			})
			t.Run("pending deadline", func(t *testing.T) {
				t0 := a.base()
				id, _ := a.request(t0, rec)
				id2, _ := a.request(t0, rec)
				_, err := a.verdict(t0.Add(pendingTTL-time.Millisecond), id2, "alice", entry.Approve)
				wantOK(t, "verdict a millisecond before the deadline", err)
				_, err = a.verdict(t0.Add(pendingTTL), id, "alice", entry.Approve)
				wantRefusal(t, "verdict at the pending deadline", err, ledger.CodeExpired, "")
				_, err = a.append(t0.Add(pendingTTL), consumption(id, rec))
				wantRefusal(t, "consumption of an expired request", err, ledger.CodeExpired, "")
			})
			t.Run("pending", func(t *testing.T) {
				t0 := a.base()
				id, _ := a.request(t0, rec)
				_, err := a.append(t0.Add(time.Minute), consumption(id, rec))
				wantRefusal(t, "consumption of a pending approval", err, ledger.CodePending, "")
			})
			t.Run("denied", func(t *testing.T) {
				t0 := a.base()
				id, _ := a.request(t0, rec)
				_, err := a.verdict(t0.Add(time.Second), id, "alice", entry.Reject)
				wantOK(t, "deny", err)
				_, err = a.append(t0.Add(time.Minute), consumption(id, rec))
				wantRefusal(t, "consumption of a denied approval", err, ledger.CodeDenied, "")
				_, err = a.verdict(t0.Add(2*time.Second), id, "bob", entry.Approve)
				wantRefusal(t, "second verdict", err, ledger.CodeDecided, "")
			})
			t.Run("consumed", func(t *testing.T) {
				t0 := a.base()
				id := a.approved(t0, rec)
				_, err := a.append(t0.Add(time.Minute), consumption(id, rec))
				wantOK(t, "consumption", err)
				_, err = a.append(t0.Add(2*time.Minute), consumption(id, rec))
				wantRefusal(t, "second consumption", err, ledger.CodeConsumed, "")
				other := consumption(id, rec)
				other.Mediator = "mediator-2"
				_, err = a.append(t0.Add(2*time.Minute), other)
				wantRefusal(t, "second consumption by another mediator", err, ledger.CodeConsumed, "")
				_, err = a.append(t0.Add(time.Second+executionTTL), consumption(id, rec))
				wantRefusal(t, "second consumption after the deadline", err, ledger.CodeExpired, "")
			})
			t.Run("approval id is its own term", func(t *testing.T) {
				t0 := a.base()
				idA := a.approved(t0, rec)
				idB := a.approved(t0, rec) // the very same terms
				if idA == idB {
					t.Fatal("two requests, one id")
				}
				_, err := a.append(t0.Add(time.Minute), consumption(idA, rec))
				wantOK(t, "consume A", err)
				if st, _ := a.l.Approval(idB); st.Consumed {
					t.Fatal("consuming A spent B")
				}
				_, err = a.append(t0.Add(time.Minute), consumption(idA, rec))
				wantRefusal(t, "consume A again", err, ledger.CodeConsumed, "")
				_, err = a.append(t0.Add(time.Minute), consumption(idB, rec))
				wantOK(t, "consume B", err)
				_, err = a.append(t0.Add(time.Minute), consumption(sha256.Sum256([]byte("no such request")), rec))
				wantRefusal(t, "unknown id", err, ledger.CodeNotFound, "")
			})
			t.Run("terms", func(t *testing.T) {
				t0 := a.base()
				id := a.approved(t0, rec)
				for _, c := range []struct {
					code, term string
					change     func(r *ledger.Record)
				}{
					{ledger.CodeDigestMismatch, "params_digest", func(r *ledger.Record) { r.Params.Digest[17] ^= 1 }},
					{ledger.CodeDigestMismatch, "params_size", func(r *ledger.Record) { r.Params.Size++ }},
					{ledger.CodeMismatch, "principal", func(r *ledger.Record) { r.Principal = "agent-2" }},
					{ledger.CodeMismatch, "mediator", func(r *ledger.Record) { r.Mediator = "mediator-2" }},
					{ledger.CodeMismatch, "action", func(r *ledger.Record) { r.Action = "make_payment" }},
					{ledger.CodeMismatch, "action", func(r *ledger.Record) { r.Action, r.Params.Size = "make_payment", 99 }},
				} {
					r := consumption(id, rec)
					c.change(&r)
					_, err := a.append(t0.Add(time.Minute), r)
					wantRefusal(t, c.term, err, c.code, c.term)
					if strings := err.Error(); bytes.Contains([]byte(strings), []byte("agent-")) {
						t.Errorf("the refusal holds a value: %s", strings)
					}
				}
				_, err := a.append(t0.Add(time.Minute), consumption(id, rec))
				wantOK(t, "refusals spent nothing", err)
			})
			t.Run("verdicts", func(t *testing.T) {
				t0 := a.base()
				id, _ := a.request(t0, rec)
				_, err := a.verdict(t0.Add(time.Second), id, rec.Principal, entry.Approve)
				wantRefusal(t, "self-approval", err, ledger.CodeSelf, "")
				_, err = a.verdict(t0.Add(time.Second), sha256.Sum256([]byte("x")), "alice", entry.Approve)
				wantRefusal(t, "verdict on nothing", err, ledger.CodeNotFound, "")
				allow := testRecord(t, 2)
				allowID, _ := a.request(t0, allow)
				_, err = a.verdict(t0.Add(time.Second), allowID, "alice", entry.Approve)
				wantRefusal(t, "verdict on an allow decision", err, ledger.CodeNotFound, "")
				_, err = a.verdict(t0.Add(time.Second), id, "alice", entry.Approve)
				wantOK(t, "verdict", err)
				st, ok := a.l.Approval(id)
				if !ok || st.Verdict != entry.Approve || st.Approver != "alice" || !st.ExecutionDeadline.Equal(t0.Add(time.Second+executionTTL)) ||
					!st.PendingDeadline.Equal(t0.Add(pendingTTL)) || !st.RequestTime.Equal(t0) || st.Principal != rec.Principal ||
					st.Mediator != rec.Mediator || st.Action != rec.Action || !st.Params.Equal(rec.Params) {
					t.Errorf("status %+v", st)
				}
			})
			t.Run("outcomes", func(t *testing.T) {
				t0 := a.base()
				id := a.approved(t0, rec)
				c, err := a.append(t0.Add(time.Minute), consumption(id, rec))
				wantOK(t, "consumption", err)
				out := func(consumption uint64, id commit.Digest, mediator string, result entry.Result) error {
					_, err := a.append(t0.Add(2*time.Minute), ledger.Record{Kind: entry.KindOutcome, ApprovalID: id,
						Consumption: consumption, Mediator: mediator, Result: result, OperationID: "op-1"})
					return err
				}
				wantRefusal(t, "outcome of a verdict", out(c.Index-1, id, rec.Mediator, entry.Succeeded), ledger.CodeNoConsumption, "")
				wantRefusal(t, "outcome of a later index", out(c.Index+1000, id, rec.Mediator, entry.Succeeded), ledger.CodeNoConsumption, "")
				wantRefusal(t, "outcome naming another approval", out(c.Index, sha256.Sum256([]byte("x")), rec.Mediator, entry.Succeeded), ledger.CodeMismatch, "approval")
				wantRefusal(t, "outcome by another mediator", out(c.Index, id, "mediator-2", entry.Succeeded), ledger.CodeMismatch, "mediator")
				wantOK(t, "unknown", out(c.Index, id, rec.Mediator, entry.Unknown))
				wantOK(t, "unknown again", out(c.Index, id, rec.Mediator, entry.Unknown))
				wantOK(t, "succeeded resolves unknown", out(c.Index, id, rec.Mediator, entry.Succeeded))
				wantRefusal(t, "after succeeded", out(c.Index, id, rec.Mediator, entry.Failed), ledger.CodeOutcomeFinal, "")
				wantRefusal(t, "after succeeded, unknown", out(c.Index, id, rec.Mediator, entry.Unknown), ledger.CodeOutcomeFinal, "")
				if st, _ := a.l.Approval(id); st.Outcome != entry.Succeeded || st.Consumption != c.Index {
					t.Errorf("status %+v", st)
				}
			})

			// What the ledger appended, an offline auditor accepts.
			auditLog(t, a.l, a.k)
		})
	}
}

// auditLog exports the whole log and checks it with verify.VerifyApprovals:
// the ledger appended nothing the auditor calls a violation.
func auditLog(t *testing.T, l *ledger.Ledger, k *ledger.Key) {
	t.Helper()
	ctx := t.Context()
	if _, err := l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := l.Export(ctx, &buf, 0, l.Size(), ledger.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	vk, err := verify.ParseKey(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.VerifyApprovals(&buf, vk, verify.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Consumed == 0 {
		t.Errorf("audit: %d violations %+v, %d consumed", rep.ViolationCount, rep.Violations, rep.Consumed)
	}
}

// Before any approval_config, a needs_approval decision opens nothing.
func TestApprovalNeedsConfig(t *testing.T) {
	ctx := t.Context()
	l := openTest(t, memory.New(), testKey(t))
	defer l.Close()
	if _, _, ok := l.ApprovalConfig(); ok {
		t.Fatal("configured from the start")
	}
	r, err := l.Append(ctx, requestRecord(t))
	wantOK(t, "request", err)
	e, _ := entry.Parse(r.Entry)
	id, _ := e.Hash()
	if _, ok := l.Approval(id); ok {
		t.Fatal("an approval opened without a config")
	}
	_, err = l.Append(ctx, ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: "alice", Verdict: entry.Approve, PreviewDigest: sha256.Sum256(nil)})
	wantRefusal(t, "verdict", err, ledger.CodeNotFound, "")
	_, err = l.Append(ctx, ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Minute})
	wantOK(t, "config", err)
	if p, x, ok := l.ApprovalConfig(); !ok || p != time.Hour || x != time.Minute {
		t.Fatalf("config %v %v %v", p, x, ok)
	}
	// A record of a version 4 kind with a decision field is bad input.
	_, err = l.Append(ctx, ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Minute, Decision: entry.Allow})
	if !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Fatalf("config with a decision: %v", err)
	}
}

// PendingApprovals lists the approvals awaiting a verdict, in request
// order, until their deadline.
func TestPendingApprovals(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	rec := requestRecord(t)
	id1, i1 := a.request(t0, rec)
	id2, i2 := a.request(t0.Add(time.Hour), rec)
	id3, _ := a.request(t0.Add(2*time.Hour), rec)
	if _, err := a.verdict(t0.Add(3*time.Hour), id3, "alice", entry.Reject); err != nil {
		t.Fatal(err)
	}
	list := a.l.PendingApprovals(t0.Add(3 * time.Hour))
	if len(list) != 2 || list[0].ID != id1 || list[0].Request != i1 || list[1].ID != id2 || list[1].Request != i2 {
		t.Fatalf("pending %+v", list)
	}
	if list := a.l.PendingApprovals(t0.Add(pendingTTL)); len(list) != 1 || list[0].ID != id2 {
		t.Fatalf("pending at the first deadline %+v", list)
	}
}

// Of 64 simultaneous consumptions of one approval exactly one is
// appended; the others are refused approval_consumed. The check runs in
// the sequencer: checked before queueing, several would pass.
func TestApprovalConcurrentConsumption(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	rec := requestRecord(t)
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	for round := range rounds {
		id := a.approved(t0, rec)
		a.clock.set(t0.Add(time.Minute))
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 64)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = a.l.Append(context.Background(), consumption(id, rec))
			}()
		}
		close(start)
		wg.Wait()
		var ok, consumed int
		for _, err := range errs {
			var ae *ledger.ApprovalError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &ae) && ae.Code == ledger.CodeConsumed:
				consumed++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 || consumed != 63 {
			t.Fatalf("round %d: %d appended, %d refused approval_consumed", round, ok, consumed)
		}
	}
}

// A retried consumption (same idempotency key) gets the first receipt,
// not approval_consumed; another consumption under the key is a
// conflict.
func TestApprovalIdempotentRetry(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	rec := requestRecord(t)
	id := a.approved(t0, rec)
	c := consumption(id, rec)
	c.IdempotencyKey = "consume-1"
	first, err := a.append(t0.Add(time.Minute), c)
	wantOK(t, "consumption", err)
	again, err := a.append(t0.Add(2*time.Minute), c)
	if err != nil || !again.Replayed || again.Index != first.Index || !bytes.Equal(again.Entry, first.Entry) {
		t.Fatalf("retry: %+v %v", again, err)
	}
	id2 := a.approved(t0, rec)
	other := consumption(id2, rec)
	other.IdempotencyKey = "consume-1"
	if _, err := a.append(t0.Add(time.Minute), other); !errors.Is(err, ledger.ErrIdempotencyConflict) {
		t.Fatalf("another approval under the key: %v", err)
	}
	// Retries racing the original join it.
	c2 := consumption(id2, rec)
	c2.IdempotencyKey = "consume-2"
	var wg sync.WaitGroup
	receipts := make([]ledger.Receipt, 16)
	errs := make([]error, 16)
	for i := range receipts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[i], errs[i] = a.l.Append(context.Background(), c2)
		}()
	}
	wg.Wait()
	for i := range receipts {
		if errs[i] != nil || receipts[i].Index != receipts[0].Index {
			t.Fatalf("retry %d: %+v %v", i, receipts[i], errs[i])
		}
	}
}

// The state is rebuilt at Open: an approval approved before a restart is
// consumable once after it, consumed after another restart, and an
// idempotent retry across a restart gets the first receipt.
func TestApprovalRestart(t *testing.T) {
	for _, s := range testStores {
		t.Run(s.name, func(t *testing.T) {
			a := newApprovalLog(t, s.open(t))
			rec := requestRecord(t)
			id := a.approved(t0, rec)
			pending, _ := a.request(t0, rec)
			a.reopen()
			if p, x, ok := a.l.ApprovalConfig(); !ok || p != pendingTTL || x != executionTTL {
				t.Fatalf("config after restart: %v %v %v", p, x, ok)
			}
			if list := a.l.PendingApprovals(t0.Add(time.Minute)); len(list) != 1 || list[0].ID != pending {
				t.Fatalf("pending after restart: %+v", list)
			}
			c := consumption(id, rec)
			c.IdempotencyKey = "consume-1"
			first, err := a.append(t0.Add(time.Minute), c)
			wantOK(t, "consumption after a restart", err)
			a.reopen()
			again, err := a.append(t0.Add(2*time.Minute), c)
			if err != nil || !again.Replayed || again.Index != first.Index {
				t.Fatalf("retry after a restart: %+v %v", again, err)
			}
			_, err = a.append(t0.Add(2*time.Minute), consumption(id, rec))
			wantRefusal(t, "second consumption after a restart", err, ledger.CodeConsumed, "")
			_, err = a.verdict(t0.Add(2*time.Minute), id, "bob", entry.Reject)
			wantRefusal(t, "second verdict after a restart", err, ledger.CodeDecided, "")
			st, ok := a.l.Approval(id)
			if !ok || !st.Consumed || st.Consumption != first.Index || st.Verdict != entry.Approve ||
				!st.ExecutionDeadline.Equal(t0.Add(time.Second+executionTTL)) {
				t.Fatalf("status after restart: %+v", st)
			}
			out := ledger.Record{Kind: entry.KindOutcome, ApprovalID: id, Consumption: first.Index, Mediator: rec.Mediator, Result: entry.Failed}
			_, err = a.append(t0.Add(3*time.Minute), out)
			wantOK(t, "outcome", err)
			a.reopen()
			_, err = a.append(t0.Add(4*time.Minute), out)
			wantRefusal(t, "outcome after a final one, after a restart", err, ledger.CodeOutcomeFinal, "")
		})
	}
}

// A refused record changes nothing: no index is used, and the records
// around it are appended.
func TestApprovalRefusalChangesNothing(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	rec := requestRecord(t)
	id := a.approved(t0, rec)
	size := a.l.Size()
	_, err := a.append(t0.Add(time.Minute), consumption(sha256.Sum256([]byte("x")), rec))
	wantRefusal(t, "unknown", err, ledger.CodeNotFound, "")
	r, err := a.append(t0.Add(time.Minute), consumption(id, rec))
	wantOK(t, "consumption", err)
	if r.Index != size || a.l.Size() != size+1 {
		t.Fatalf("index %d, size %d, want %d", r.Index, a.l.Size(), size)
	}
}

// BenchmarkRebuildApprovals measures the scan at Open over a badger log
// of which one entry in ten takes part in a lifecycle (a request, its
// verdict, a consumption and an outcome among forty entries): ns/entry
// times a million is the cost per million entries.
func BenchmarkRebuildApprovals(b *testing.B) {
	ctx := context.Background()
	s, err := badger.Open(ctx, b.TempDir(), badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	k := testKey(b)
	clock := &testClock{t: t0}
	l, err := ledger.Open(ctx, s, k, ledger.Options{CheckpointInterval: -1, Now: clock.now, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Append(ctx, ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}); err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	const group = 40
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for g := range n / group {
		req := requestRecord(b)
		req.Principal = fmt.Sprintf("agent-%d", g)
		r, err := l.Append(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		e, _ := entry.Parse(r.Entry)
		id, _ := e.Hash()
		if _, err := l.Append(ctx, ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: "alice", Verdict: entry.Approve, PreviewDigest: sha256.Sum256(nil)}); err != nil {
			b.Fatal(err)
		}
		c, err := l.Append(ctx, consumption(id, req))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(ctx, ledger.Record{Kind: entry.KindOutcome, ApprovalID: id, Consumption: c.Index, Mediator: req.Mediator, Result: entry.Succeeded}); err != nil {
			b.Fatal(err)
		}
		for i := range group - 4 {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := l.Append(ctx, testRecord(b, g*group+i)); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	l.Close()
	size := l.Size()
	b.ResetTimer()
	for b.Loop() {
		a, refused, err := ledger.RebuildApprovals(ctx, s, size)
		if err != nil || refused != 0 || a.Len() != n/group {
			b.Fatalf("%v, %d refused, %d approvals", err, refused, a.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/entry")
}

// BenchmarkApprovalMemory reports the heap an approval holds in the
// lifecycle state, per state it is in: B/open for one awaiting a verdict
// (its whole record), B/consumed for one approved, consumed and given a
// final outcome, and B/expired for one never decided whose pending
// deadline passed (both reduced; docs/approvals.md §Lifecycle, memory).
func BenchmarkApprovalMemory(b *testing.B) {
	const n = 100_000
	req := requestRecord(b)
	// A few principals, as in life: an interned name is shared.
	principals := make([]string, 64)
	for i := range principals {
		principals[i] = fmt.Sprintf("agent-%d", i)
	}
	tick := func(s *ledger.Approvals, index uint64, at time.Time) {
		apply, err := s.Admit(&entry.Entry{Kind: entry.KindApprovalConfig, Index: index, Time: at, PendingTTL: pendingTTL, ExecutionTTL: executionTTL}, false)
		if err != nil {
			b.Fatal(err)
		}
		apply(commit.Digest{})
	}
	// measure reports the heap grown by fill per approval, as metric.
	measure := func(metric string, fill func(s *ledger.Approvals, i int) uint64, settle bool) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC() // what the previous measure left is gone
		runtime.ReadMemStats(&before)
		s := ledger.NewApprovals(pendingTTL, executionTTL)
		var next uint64
		for i := range n {
			next = fill(s, i)
		}
		if settle { // two entries past every deadline: the second sweeps
			tick(s, next, t0.Add(2*pendingTTL))
			tick(s, next+1, t0.Add(2*pendingTTL))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.Len() != n {
			b.Fatalf("%s: %d approvals, want %d", metric, s.Len(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, metric)
		runtime.KeepAlive(s)
	}
	request := func(s *ledger.Approvals, index uint64, i int) (*entry.Entry, commit.Digest) {
		e := &entry.Entry{Index: index, Time: t0, Decision: entry.NeedsApproval,
			Mediator: req.Mediator, Principal: principals[i%len(principals)], Action: req.Action, Params: req.Params}
		apply, _ := s.Admit(e, false)
		id := sha256.Sum256(fmt.Appendf(nil, "%d", i))
		apply(id)
		return e, id
	}
	for b.Loop() {
		measure("B/open", func(s *ledger.Approvals, i int) uint64 {
			request(s, uint64(i+1), i)
			return uint64(i + 2)
		}, false)
		measure("B/expired", func(s *ledger.Approvals, i int) uint64 {
			request(s, uint64(i+1), i)
			return uint64(i + 2)
		}, true)
		measure("B/consumed", func(s *ledger.Approvals, i int) uint64 {
			e, id := request(s, uint64(4*i+1), i)
			v := &entry.Entry{Kind: entry.KindApproval, Index: e.Index + 1, Time: t0, ApprovalID: id, Approver: "alice", Verdict: entry.Approve}
			apply, _ := s.Admit(v, false)
			apply(commit.Digest{})
			c := &entry.Entry{Kind: entry.KindConsumption, Index: e.Index + 2, Time: t0, ApprovalID: id,
				Mediator: e.Mediator, Principal: e.Principal, Action: e.Action, Params: e.Params}
			apply, _ = s.Admit(c, false)
			apply(commit.Digest{})
			o := &entry.Entry{Kind: entry.KindOutcome, Index: e.Index + 3, Time: t0, ApprovalID: id, Consumption: c.Index, Mediator: e.Mediator, Result: entry.Succeeded}
			apply, _ = s.Admit(o, false)
			apply(commit.Digest{})
			return e.Index + 4
		}, false)
	}
}

// A closed approval is reduced: Approval reports its lifecycle with
// Reduced set and without the request's terms, and ReadApproval reads
// those from its entries, giving the status it had whole; across a
// restart too, from the snapshot Close wrote.
func TestApprovalReduced(t *testing.T) {
	for _, st := range testStores {
		t.Run(st.name, func(t *testing.T) {
			a := newApprovalLog(t, st.open(t))
			rec := requestRecord(t)
			rec2 := rec
			rec2.Principal, rec2.Mediator = "agent-2", "mediator-2"
			expired, _ := a.request(t0, rec)
			open, _ := a.request(t0.Add(10*time.Second), rec2)
			denied, _ := a.request(t0.Add(10*time.Second), rec)
			whole := map[commit.Digest]ledger.ApprovalStatus{}
			whole[denied], _ = a.l.Approval(denied) // whole, as it is open
			v, err := a.verdict(t0.Add(11*time.Second), denied, "alice", entry.Reject)
			wantOK(t, "deny", err)
			w := whole[denied]
			w.Verdict, w.VerdictIndex, w.Approver = entry.Reject, v.Index, "alice"
			whole[denied] = w
			consumed := a.approved(t0.Add(12*time.Second), rec2)
			whole[consumed], _ = a.l.Approval(consumed)
			c, err := a.append(t0.Add(14*time.Second), consumption(consumed, rec2))
			wantOK(t, "consume", err)
			o, err := a.append(t0.Add(15*time.Second), ledger.Record{Kind: entry.KindOutcome, ApprovalID: consumed,
				Consumption: c.Index, Mediator: rec2.Mediator, Result: entry.Succeeded})
			wantOK(t, "outcome", err)
			w = whole[consumed]
			w.Consumed, w.Consumption, w.Outcome, w.OutcomeIndex = true, c.Index, entry.Succeeded, o.Index
			whole[consumed] = w
			lapsed := a.approved(t0.Add(17*time.Second), rec)
			for _, id := range []commit.Digest{open, expired, lapsed} {
				whole[id], _ = a.l.Approval(id)
			}
			_, err = a.verdict(t0.Add(pendingTTL), expired, "alice", entry.Approve)
			wantRefusal(t, "a verdict at the deadline", err, ledger.CodeExpired, "")
			_, err = a.verdict(t0.Add(pendingTTL+5*time.Second), open, "alice", entry.Approve)
			wantOK(t, "approve open", err)
			whole[open], _ = a.l.Approval(open)
			// The next lifecycle entry sweeps the expired and the lapsed.
			a.request(t0.Add(pendingTTL+6*time.Second), rec)
			check := func(when string) {
				t.Helper()
				s, _ := a.l.ApprovalState()
				if got := s.Closed(); got != 4 {
					t.Fatalf("%s: %d approvals reduced, want 4", when, got)
				}
				for id, want := range whole {
					st, ok := a.l.Approval(id)
					if !ok || st.Reduced != (id != open) {
						t.Fatalf("%s: Approval(%x): %+v, %v", when, id[:4], st, ok)
					}
					if st.Reduced && (st.Mediator != "" || st.Action != "" || st.Params != (commit.Commitment{}) || st.Approver != "") {
						t.Fatalf("%s: a reduced status holds the request's terms: %+v", when, st)
					}
					st, ok, err := a.l.ReadApproval(t.Context(), id)
					if err != nil || !ok {
						t.Fatalf("%s: ReadApproval(%x): %v, %v", when, id[:4], ok, err)
					}
					st.Reduced = false
					if st != want {
						t.Fatalf("%s: ReadApproval(%x) = %+v\nwant %+v", when, id[:4], st, want)
					}
				}
				if _, ok, err := a.l.ReadApproval(t.Context(), commit.Digest{7}); ok || err != nil {
					t.Fatalf("%s: ReadApproval of no approval: %v, %v", when, ok, err)
				}
			}
			check("running")
			a.reopen()
			check("reopened")
		})
	}
}
