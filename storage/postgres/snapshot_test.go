package postgres_test

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	lcommit "github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
)

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A ledger on PostgreSQL writes its approval snapshot at Close, and the
// next sequencer (a takeover opens the ledger the same way) reads it
// instead of the whole log. (TestSnapshotFenced: a fenced store writes
// none.)
func TestLedgerApprovalSnapshot(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	skey, _, err := ledger.GenerateKey("ledger.example.com/pg")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	a := open(t, url)
	acquire(t, a, "a")
	la, err := ledger.Open(ctx, a, key, ledger.Options{CheckpointInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	params, err := lcommit.Params([]byte(`{"amount_minor":125000,"payee":"payee-0001"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Append(ctx, ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r, err := la.Append(ctx, ledger.Record{Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment",
		Decision: entry.NeedsApproval, Policies: []string{"payments.review"}, Params: params,
		Tiers: sha256.Sum256([]byte("tiers")), Attributes: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(r.Entry)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Append(ctx, ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: "approver-1",
		Verdict: entry.Approve, PreviewDigest: sha256.Sum256([]byte("preview"))}); err != nil {
		t.Fatal(err)
	}
	if err := la.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := a.Snapshot(ctx); err != nil || n != 3 {
		t.Fatalf("Snapshot after Close = %d, %v; want 3", n, err)
	}

	// B takes over and opens the ledger from the snapshot.
	b := open(t, url)
	expireLease(t, url)
	acquire(t, b, "b")
	var logs syncBuffer
	lb, err := ledger.Open(ctx, b, key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "snapshot_size=3") {
		t.Errorf("the takeover did not read the snapshot:\n%s", out)
	}
	if st, ok := lb.Approval(id); !ok || st.Verdict != entry.Approve {
		t.Errorf("Approval after the takeover = %+v, %v; want approved", st, ok)
	}
	if _, err := lb.Append(ctx, ledger.Record{Mediator: "mediator-1", Principal: "agent-2", Action: "make_payment",
		Decision: entry.Allow, Policies: []string{"payments.review"}, Params: params,
		Tiers: sha256.Sum256([]byte("tiers")), Attributes: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.Snapshot(ctx); err != nil || n != 4 {
		t.Fatalf("Snapshot after B's Close = %d, %v; want 4", n, err)
	}
}
