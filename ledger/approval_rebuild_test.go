package ledger_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The rebuild at Open re-admits each entry by the sequencer's rules, and
// a verdict or consumption must name its approval's own request index: a
// log written by something else than this ledger, whose verdict names the
// right approval but another request index, changes nothing. (The
// sequencer fills the index itself, so only a forged log can hold one.)
func TestRebuildRefusesForgedRequestIndex(t *testing.T) {
	params := logtest.Params(`{"amount_minor":125000,"payee":"payee-0001"}`)
	for _, c := range []struct {
		name         string
		request      func(opened uint64) uint64
		wantVerdict  entry.Verdict
		wantRefused  uint64
		wantConsumed bool
	}{
		{"own index", func(i uint64) uint64 { return i }, entry.Approve, 0, true},
		{"earlier index", func(i uint64) uint64 { return i - 1 }, "", 2, false},
		{"other request's index", func(i uint64) uint64 { return i + 1 }, "", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lg, err := logtest.New("ledger.example.com/log")
			if err != nil {
				t.Fatal(err)
			}
			t1 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			add := func(e entry.Entry, at time.Duration) uint64 {
				t.Helper()
				e.Time = t1.Add(at)
				i, _, err := lg.Append(e)
				if err != nil {
					t.Fatal(err)
				}
				return i
			}
			add(entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Hour}, 0)
			request := func() uint64 {
				return add(entry.Entry{Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment",
					Decision: entry.NeedsApproval, Policies: []string{"payments.review"}, Params: params,
					Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`)}, time.Second)
			}
			opened := request()
			request() // another approval, at opened+1
			id := lg.Hash(opened)
			add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: c.request(opened), Approver: "approver-1",
				Verdict: entry.Approve, PreviewDigest: logtest.Digest("preview")}, 2*time.Second)
			add(entry.Entry{Kind: entry.KindConsumption, ApprovalID: id, Request: c.request(opened), Mediator: "mediator-1",
				Principal: "agent-1", Action: "make_payment", Params: params}, 3*time.Second)

			store := memory.New()
			b := ledger.Batch{Start: 0}
			for i := range lg.Len() {
				raw := lg.Entry(i)
				b.Entries = append(b.Entries, raw)
				b.LeafHashes = append(b.LeafHashes, [ledger.HashSize]byte(rfc6962.DefaultHasher.HashLeaf(raw)))
			}
			if err := store.Commit(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			s, refused, err := ledger.RebuildApprovals(t.Context(), store, lg.Len())
			if err != nil {
				t.Fatal(err)
			}
			if refused != c.wantRefused {
				t.Errorf("refused %d entries, want %d", refused, c.wantRefused)
			}
			verdict, consumption, ok := s.Status(id)
			if !ok {
				t.Fatal("the approval was not rebuilt")
			}
			if verdict != c.wantVerdict || (consumption != 0) != c.wantConsumed {
				t.Errorf("rebuilt verdict %q consumed %v; want %q %v", verdict, consumption != 0, c.wantVerdict, c.wantConsumed)
			}
		})
	}
}

// gatedStore holds each Commit until the test opens the gate, and says
// when one is waiting: its batch is chained and not durable.
type gatedStore struct {
	ledger.Store
	mu      sync.Mutex
	closed  bool
	waiting chan struct{}
	open    chan struct{}
}

func (s *gatedStore) Commit(ctx context.Context, b ledger.Batch) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		s.waiting <- struct{}{}
		<-s.open
	}
	return s.Store.Commit(ctx, b)
}

// Approval and PendingApprovals report what the durable entries tell: a
// verdict chained but not yet durable is not shown (its index could not
// be read yet), and shows once its batch is durable.
func TestApprovalStatusIsDurable(t *testing.T) {
	gs := &gatedStore{Store: memory.New(), waiting: make(chan struct{}), open: make(chan struct{})}
	a := newApprovalLog(t, gs)
	id, _ := a.request(t0, requestRecord(t))
	gs.mu.Lock()
	gs.closed = true
	gs.mu.Unlock()
	a.clock.set(t0.Add(time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := a.l.Append(context.Background(), ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: "alice",
			Verdict: entry.Approve, PreviewDigest: sha256.Sum256([]byte("preview"))})
		done <- err
	}()
	<-gs.waiting // the verdict is chained; its batch waits to be stored
	if st, ok := a.l.Approval(id); !ok || st.Verdict != "" || !st.ExecutionDeadline.IsZero() {
		t.Errorf("a verdict not yet durable is reported: %+v", st)
	}
	if list := a.l.PendingApprovals(t0.Add(2 * time.Second)); len(list) != 1 || list[0].ID != id {
		t.Errorf("pending while its verdict is not durable: %+v", list)
	}
	gs.mu.Lock()
	gs.closed = false
	gs.mu.Unlock()
	close(gs.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, ok := a.l.Approval(id); !ok || st.Verdict != entry.Approve || st.VerdictIndex != 2 {
		t.Errorf("the durable verdict: %+v", st)
	}
	if list := a.l.PendingApprovals(t0.Add(2 * time.Second)); len(list) != 0 {
		t.Errorf("pending after a durable verdict: %+v", list)
	}
}
