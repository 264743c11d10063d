package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestStalledCommitDoesNotHoldOffTakeover: A's Commit stops with its
// transaction open, holding tree_head's row lock (as when A's process is
// frozen between Commit's statements and its COMMIT); A's lease expires.
// With StallTimeout the server aborts A's transaction, so B's
// AcquireLease goes through while A is still stopped (without it B waits
// as long as A: TestCommitInFlightDuringTakeover); A's Commit, resumed,
// fails and leaves nothing, and B continues the log with A's keys.
func TestStalledCommitDoesNotHoldOffTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, err := postgres.Open(ctx, url, postgres.Options{StallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 2))

	entered, release := hold(t, a, "commit")
	stalled := batch(2, 3, "k2", "k3", "k4")
	commitDone := result(func() error { return a.Commit(ctx, stalled) })
	<-entered
	expireLease(t, url)
	// A deadline, not a timing: without the server's abort B would wait
	// for A's lock until A resumed, here never.
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lb, err := b.AcquireLease(actx, "b", "http://b.example.org", hour)
	if err != nil {
		t.Fatalf("B's AcquireLease while A's Commit is stopped mid-transaction: %v", err)
	}
	if lb.Epoch != 2 {
		t.Errorf("B's epoch %d, want 2", lb.Epoch)
	}
	release()
	if err := <-commitDone; err == nil {
		t.Fatal("A's Commit, stopped until after B took over, succeeded")
	}
	checkNothingOf(t, b, stalled, 2)
	commit(t, b, batch(2, 3, "k2", "k3", "k4"))
}
