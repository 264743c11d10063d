package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
)

// outcomeOf is the outcome of the allowed act of the decision at index d.
func outcomeOf(d uint64, mediator string, result entry.Result) ledger.Record {
	return ledger.Record{Kind: entry.KindOutcome, DecisionIndex: d, Mediator: mediator, Result: result}
}

// The rules of the outcome of an allowed act, on each store and across a
// restart: the decision must be an allow decision by the same mediator,
// unknown outcomes may repeat, a second final one is refused, and a
// final one's retry with an idempotency key gets the first receipt.
func TestDecisionOutcome(t *testing.T) {
	for _, s := range testStores {
		t.Run(s.name, func(t *testing.T) {
			a := newApprovalLog(t, s.open(t))
			ctx := t.Context()
			decide := func(d entry.Decision) uint64 {
				t.Helper()
				rec := testRecord(t, 1)
				rec.Decision = d
				r, err := a.l.Append(ctx, rec)
				wantOK(t, "decision", err)
				return r.Index
			}
			allowed, denied, asked := decide(entry.Allow), decide(entry.Deny), decide(entry.NeedsApproval)
			for _, c := range []struct {
				what       string
				rec        ledger.Record
				code, term string
			}{
				{"of a deny decision", outcomeOf(denied, "mediator-1", entry.Succeeded), ledger.CodeNoDecision, ""},
				{"of a needs_approval decision", outcomeOf(asked, "mediator-1", entry.Unknown), ledger.CodeNoDecision, ""},
				{"of the approval_config", outcomeOf(0, "mediator-1", entry.Unknown), ledger.CodeNoDecision, ""},
				{"of an index past the size", outcomeOf(a.l.Size(), "mediator-1", entry.Unknown), ledger.CodeNoDecision, ""},
				{"by another mediator", outcomeOf(allowed, "mediator-2", entry.Succeeded), ledger.CodeOutcomeMismatch, "mediator"},
			} {
				_, err := a.l.Append(ctx, c.rec)
				wantRefusal(t, c.what, err, c.code, c.term)
			}
			size := a.l.Size()
			for _, r := range []entry.Result{entry.Unknown, entry.Unknown, entry.Succeeded} {
				rc, err := a.l.Append(ctx, outcomeOf(allowed, "mediator-1", r))
				wantOK(t, string(r), err)
				e, err := entry.Parse(rc.Entry)
				if err != nil || e.Version() != entry.Version5 || e.DecisionIndex != allowed || e.Result != r {
					t.Fatalf("outcome entry: %+v %v", e, err)
				}
			}
			if got := a.l.Size(); got != size+3 {
				t.Fatalf("size %d after the refusals and three outcomes from %d", got, size)
			}
			for _, r := range []entry.Result{entry.Failed, entry.Succeeded, entry.Unknown} {
				_, err := a.l.Append(ctx, outcomeOf(allowed, "mediator-1", r))
				wantRefusal(t, "an outcome ("+string(r)+") after the final one", err, ledger.CodeOutcomeFinal, "")
			}

			// A final outcome's retry with its idempotency key.
			second := decide(entry.Allow)
			keyed := outcomeOf(second, "mediator-1", entry.Failed)
			keyed.OperationID, keyed.IdempotencyKey = "op-1", "outcome-1"
			first, err := a.l.Append(ctx, keyed)
			wantOK(t, "keyed final outcome", err)
			again, err := a.l.Append(ctx, keyed)
			if err != nil || !again.Replayed || again.Index != first.Index {
				t.Fatalf("retry: %+v %v", again, err)
			}
			other := keyed
			other.Result = entry.Succeeded
			_, err = a.l.Append(ctx, other)
			wantRefusal(t, "another final outcome under the same key", err, ledger.CodeOutcomeFinal, "")

			a.reopen()
			_, err = a.l.Append(ctx, outcomeOf(allowed, "mediator-1", entry.Succeeded))
			wantRefusal(t, "a second final outcome after a restart", err, ledger.CodeOutcomeFinal, "")
			_, err = a.l.Append(ctx, outcomeOf(allowed, "mediator-1", entry.Unknown))
			wantRefusal(t, "an unknown outcome after the final one, after a restart", err, ledger.CodeOutcomeFinal, "")
			again, err = a.l.Append(ctx, keyed)
			if err != nil || !again.Replayed || again.Index != first.Index {
				t.Fatalf("retry after a restart: %+v %v", again, err)
			}
			// The approval lifecycle is untouched by the outcomes.
			rec := requestRecord(t)
			id := a.approved(a.base(), rec)
			c := consumption(id, rec)
			cr, err := a.append(a.clock.now().Add(time.Minute), c)
			wantOK(t, "consumption", err)
			_, err = a.l.Append(ctx, ledger.Record{Kind: entry.KindOutcome, ApprovalID: id, Consumption: cr.Index, Mediator: rec.Mediator, Result: entry.Succeeded})
			wantOK(t, "outcome of the consumption", err)
			auditLog(t, a.l, a.k)
		})
	}
}

// Of many final outcomes of one decision sent at once, one is appended
// and the others are refused outcome_final; retries with one idempotency
// key racing the first join it.
func TestDecisionOutcomeConcurrent(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	r, err := a.l.Append(t.Context(), testRecord(t, 1))
	wantOK(t, "decision", err)
	for _, key := range []string{"", "outcome-1"} {
		d := r.Index
		if key != "" {
			r2, err := a.l.Append(t.Context(), testRecord(t, 2))
			wantOK(t, "decision", err)
			d = r2.Index
		}
		var wg sync.WaitGroup
		errs := make([]error, 16)
		receipts := make([]ledger.Receipt, 16)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := outcomeOf(d, "mediator-1", entry.Succeeded)
				rec.IdempotencyKey = key
				receipts[i], errs[i] = a.l.Append(t.Context(), rec)
			}()
		}
		wg.Wait()
		appended, refused := 0, 0
		for i, err := range errs {
			var ae *ledger.ApprovalError
			switch {
			case err == nil && !receipts[i].Replayed:
				appended++
			case err == nil && key != "" && receipts[i].Index == receipts[0].Index:
			case errors.As(err, &ae) && ae.Code == ledger.CodeOutcomeFinal && key == "":
				refused++
			default:
				t.Fatalf("key %q, outcome %d: %+v %v", key, i, receipts[i], err)
			}
		}
		if appended != 1 || (key == "" && refused != 15) {
			t.Fatalf("key %q: %d appended, %d refused", key, appended, refused)
		}
	}
	// Unknown and final outcomes at once: whatever the order, no outcome
	// follows the final one in the log, as the audit checks.
	r3, err := a.l.Append(t.Context(), testRecord(t, 3))
	wantOK(t, "decision", err)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			result := entry.Unknown
			if i%4 == 3 {
				result = entry.Failed
			}
			_, err := a.l.Append(t.Context(), outcomeOf(r3.Index, "mediator-1", result))
			var ae *ledger.ApprovalError
			if err != nil && (!errors.As(err, &ae) || ae.Code != ledger.CodeOutcomeFinal) {
				t.Errorf("outcome %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	ctx := t.Context()
	if _, err := a.l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.l.Export(ctx, &buf, 0, a.l.Size(), ledger.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	vk, err := verify.ParseKey(a.k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.VerifyApprovals(&buf, vk, verify.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.AllowedOutcomes.Succeeded != 2 || rep.AllowedOutcomes.Failed != 1 {
		t.Errorf("audit: %d violations %+v, outcomes %+v", rep.ViolationCount, rep.Violations, rep.AllowedOutcomes)
	}
}

// A version 5 outcome record with version 4 members is refused as
// invalid, appending nothing.
func TestDecisionOutcomeInvalid(t *testing.T) {
	a := newApprovalLog(t, memory.New())
	r, err := a.l.Append(t.Context(), testRecord(t, 1))
	wantOK(t, "decision", err)
	rec := outcomeOf(r.Index, "mediator-1", entry.Succeeded)
	rec.Consumption = 1
	if _, err := a.l.Append(t.Context(), rec); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Fatalf("with a consumption: %v", err)
	}
	rec = outcomeOf(r.Index, "mediator-1", "done")
	if _, err := a.l.Append(t.Context(), rec); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Fatalf("unknown result: %v", err)
	}
}

// heldStore holds every Commit until open is closed, once gate is set,
// and says on committing when a Commit is held; it counts the look-ups of
// idempotency keys that end in watched.
type heldStore struct {
	ledger.Store
	gate       atomic.Bool
	open       chan struct{}
	committing chan struct{}
	watched    string
	lookups    atomic.Int32
}

func (s *heldStore) Commit(ctx context.Context, b ledger.Batch) error {
	if s.gate.Load() {
		s.committing <- struct{}{}
		<-s.open
	}
	return s.Store.Commit(ctx, b)
}

func (s *heldStore) IndexOfKey(ctx context.Context, key []byte) (uint64, error) {
	if s.watched != "" && bytes.HasSuffix(key, []byte(s.watched)) {
		s.lookups.Add(1)
	}
	return s.Store.IndexOfKey(ctx, key)
}

// An unknown outcome that passed Append's look-up while a final outcome
// of its decision was queued, not yet sequenced, ahead of it, is refused
// by the sequencer, which looks again: nothing follows a final outcome.
func TestDecisionOutcomeQueuedBehindFinal(t *testing.T) {
	store := &heldStore{Store: memory.New(), open: make(chan struct{}), committing: make(chan struct{}, 4), watched: "filler-3"}
	l, err := ledger.Open(t.Context(), store, testKey(t), ledger.Options{CheckpointInterval: -1, MaxBatch: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Append(t.Context(), testRecord(t, 1))
	wantOK(t, "decision", err)
	store.gate.Store(true)
	released := false
	defer func() {
		if !released {
			close(store.open) // let Close commit
		}
		l.Close()
	}()
	answers := make(chan error, 4)
	appendAsync := func(rec ledger.Record) {
		go func() {
			_, err := l.Append(context.Background(), rec)
			answers <- err
		}()
	}
	// The committer holds one entry (2), the pending batch another (3):
	// the sequencer takes no more records until the commit returns. The
	// sequencer looks 3's key up (its second look-up, after Append's)
	// just before it chains it.
	appendAsync(testRecord(t, 2))
	select {
	case <-store.committing:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit of entry 2")
	}
	third := testRecord(t, 3)
	third.IdempotencyKey = "filler-3"
	appendAsync(third)
	waitUntil(t, "the sequencer to look the third record's key up", func() bool { return store.lookups.Load() == 2 })
	appendAsync(outcomeOf(d.Index, "mediator-1", entry.Succeeded))
	waitUntil(t, "the final outcome queued", func() bool { return l.Queued() == 1 })
	appendAsync(outcomeOf(d.Index, "mediator-1", entry.Unknown))
	waitUntil(t, "the unknown outcome queued behind it", func() bool { return l.Queued() == 2 })
	close(store.open)
	released = true
	var refused int
	for range 4 {
		var ae *ledger.ApprovalError
		switch err := <-answers; {
		case err == nil:
		case errors.As(err, &ae) && ae.Code == ledger.CodeOutcomeFinal:
			refused++
		default:
			t.Fatal(err)
		}
	}
	if refused != 1 || l.Size() != d.Index+4 {
		t.Fatalf("%d refused, size %d: want the unknown outcome refused and 3 entries after the decision", refused, l.Size())
	}
}

// waitUntil waits for cond, with a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
