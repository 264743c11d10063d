package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// The ledger writes both version 3 kinds: a policy-set publication and a
// decision it made, each chained and signed like any entry.
func TestVersion3Records(t *testing.T) {
	ctx := context.Background()
	k := testKey(t)
	l := openTest(t, memory.New(), k)
	set := sha256.Sum256([]byte("policy set"))
	pub, err := l.Append(ctx, ledger.Record{Kind: entry.KindPolicySet, PolicySet: set})
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord(t, 1)
	rec.Kind, rec.PolicySet, rec.Definition = entry.KindDecision, set, sha256.Sum256([]byte("definition"))
	rec.Decision, rec.Policies, rec.PolicyErrors = entry.Deny, []string{"b", "a"}, []string{"a"}
	dec, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []ledger.Receipt{pub, dec} {
		e, err := entry.Parse(r.Entry)
		if err != nil {
			t.Fatal(err)
		}
		if e.Version() != entry.Version3 || e.PolicySet != set || e.Verify(k.ID(), k.Public()) != nil {
			t.Errorf("entry %d: version %d, policy set %v", r.Index, e.Version(), e.PolicySet)
		}
	}

	// A publication takes no decision fields; errors need a deny that
	// lists them.
	bad := ledger.Record{Kind: entry.KindPolicySet, PolicySet: set, Action: "send_email"}
	if _, err := l.Append(ctx, bad); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Errorf("publication with an action: %v", err)
	}
	allow := rec
	allow.Decision = entry.Allow
	if _, err := l.Append(ctx, allow); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Errorf("allow with erroring policies: %v", err)
	}
}

// A retried ledger decision gets the first answer even when the retry was
// evaluated to another decision (after a policy reload); another request
// under the same key is still a conflict.
func TestVersion3IdempotentRetry(t *testing.T) {
	ctx := context.Background()
	l := openTest(t, memory.New(), testKey(t))
	rec := testRecord(t, 1)
	rec.Kind, rec.PolicySet, rec.Definition = entry.KindDecision, sha256.Sum256([]byte("set 1")), sha256.Sum256([]byte("definition"))
	rec.IdempotencyKey = "decide-1"
	first, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	retry := rec
	retry.PolicySet = sha256.Sum256([]byte("set 2"))
	retry.Decision, retry.Policies = entry.Deny, []string{"new.forbid"}
	again, err := l.Append(ctx, retry)
	if err != nil || !again.Replayed || again.Index != first.Index {
		t.Fatalf("retry: %+v %v", again, err)
	}
	other := testRecord(t, 2)
	other.Kind, other.PolicySet, other.Definition = rec.Kind, rec.PolicySet, rec.Definition
	other.IdempotencyKey = "decide-1"
	if _, err := l.Append(ctx, other); !errors.Is(err, ledger.ErrIdempotencyConflict) {
		t.Errorf("another request under the key: %v", err)
	}
	mediatorDecided := testRecord(t, 1)
	mediatorDecided.IdempotencyKey = "decide-1"
	if _, err := l.Append(ctx, mediatorDecided); !errors.Is(err, ledger.ErrIdempotencyConflict) {
		t.Errorf("a mediator's decision under a ledger decision's key: %v", err)
	}
}
