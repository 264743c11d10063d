package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

const hour = time.Hour

// expireLease makes the lease expired by the database's clock, as waiting
// out its TTL would, without waiting.
func expireLease(t *testing.T, url string) {
	t.Helper()
	// Bounded: a store holding the lease row's lock (a renewal cut off
	// half-way, TestCutOffHolder) fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "UPDATE lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatalf("expiring the lease: %v", err)
	}
}

func acquire(t *testing.T, s *postgres.Store, holder string) postgres.Lease {
	t.Helper()
	l, err := s.AcquireLease(t.Context(), holder, "http://"+holder+".example.org:8080", hour)
	if err != nil {
		t.Fatalf("AcquireLease(%s): %v", holder, err)
	}
	if l.Holder != holder || !l.Held || l.Epoch == 0 {
		t.Fatalf("AcquireLease(%s) = %+v", holder, l)
	}
	return l
}

func commit(t *testing.T, s *postgres.Store, b ledger.Batch) {
	t.Helper()
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit(batch at %d): %v", b.Start, err)
	}
}

// wantFenced checks that err is a fencing refusal, and not a conflict a
// writer would retry.
func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("%s: %v, want ErrFenced", what, err)
	}
	if errors.Is(err, ledger.ErrConflict) {
		t.Errorf("%s: %v wraps ErrConflict", what, err)
	}
}

// epochs returns the lease's epoch and tree_head's.
func epochs(t *testing.T, url string) (lease, head int64) {
	t.Helper()
	return query[int64](t, url, "SELECT epoch FROM lease"), query[int64](t, url, "SELECT epoch FROM tree_head")
}

// TestLeaseTakeover: A holds the lease; B is refused until it expires,
// then takes over; from then A's writes are refused with ErrFenced and
// leave nothing, A's renewal fails, and B continues the log.
func TestLeaseTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)

	if l, err := b.CurrentLease(ctx); err != nil || l != (postgres.Lease{}) {
		t.Fatalf("CurrentLease before any acquisition = %+v, %v; want the zero Lease", l, err)
	}
	la := acquire(t, a, "a")
	if la.Epoch != 1 || la.Address != "http://a.example.org:8080" {
		t.Errorf("first acquisition = %+v, want epoch 1 and a's address", la)
	}
	if l, err := b.CurrentLease(ctx); err != nil || l != la {
		t.Errorf("CurrentLease = %+v, %v; want %+v", l, err, la)
	}
	l, err := b.AcquireLease(ctx, "b", "http://b.example.org:8080", hour)
	if !errors.Is(err, postgres.ErrLeaseHeld) {
		t.Fatalf("B's AcquireLease while A holds it: %v, want ErrLeaseHeld", err)
	}
	if l != la {
		t.Errorf("the refusal returned %+v, want A's lease %+v", l, la)
	}
	commit(t, a, batch(0, 3, "k0", "", "k2"))
	cp := []byte("checkpoint 3 by a\n")
	if err := a.AddCheckpoint(ctx, 3, cp); err != nil {
		t.Fatal(err)
	}

	expireLease(t, url)
	if l, err := b.CurrentLease(ctx); err != nil || l.Held || l.Holder != "a" {
		t.Errorf("CurrentLease after expiry = %+v, %v; want a's, not held", l, err)
	}
	lb := acquire(t, b, "b")
	if lb.Epoch != 2 {
		t.Errorf("takeover epoch %d, want 2", lb.Epoch)
	}
	if le, he := epochs(t, url); le != 2 || he != 2 {
		t.Errorf("after the takeover: lease epoch %d, tree_head epoch %d; want 2 and 2", le, he)
	}

	fenced := batch(3, 2, "k3", "k4")
	wantFenced(t, "A's Commit after the takeover", a.Commit(ctx, fenced))
	checkNothingOf(t, a, fenced, 3)
	wantFenced(t, "A's AddCheckpoint after the takeover", a.AddCheckpoint(ctx, 3, []byte("checkpoint 3 by a, cosigned\n")))
	if got, err := a.Checkpoint(ctx, 3); err != nil || !bytes.Equal(got, cp) {
		t.Errorf("checkpoint 3 after A's fenced AddCheckpoint = %q, %v; want %q", got, err, cp)
	}
	if l, err := a.RenewLease(ctx, hour); !errors.Is(err, postgres.ErrLeaseLost) || l != lb {
		t.Errorf("A's RenewLease after the takeover = %+v, %v; want B's lease and ErrLeaseLost", l, err)
	}
	if err := a.ReleaseLease(ctx); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Errorf("A's ReleaseLease after the takeover: %v, want ErrLeaseLost", err)
	}
	if l, err := b.CurrentLease(ctx); err != nil || l != lb {
		t.Errorf("A's release changed the lease: %+v, %v; want %+v", l, err, lb)
	}

	// B continues the log from where A left it.
	commit(t, b, batch(3, 2, "k3", "k4"))
	if err := b.AddCheckpoint(ctx, 5, []byte("checkpoint 5 by b\n")); err != nil {
		t.Fatal(err)
	}
	// A stays fenced: it must stop, and retrying at the new size does not help.
	wantFenced(t, "A's Commit continuing B's log", a.Commit(ctx, batch(5, 1)))
	st, err := a.State(ctx)
	if err != nil || st.Size != 5 || st.CheckpointSize != 5 {
		t.Errorf("State = %+v, %v; want size 5 with B's checkpoint", st, err)
	}
	if i, err := a.IndexOfKey(ctx, []byte("k4")); err != nil || i != 4 {
		t.Errorf("IndexOfKey(k4) = %d, %v; want B's entry 4", i, err)
	}
	// A conflict is still a conflict for the lease holder.
	if err := b.Commit(ctx, batch(4, 1)); !errors.Is(err, ledger.ErrConflict) || errors.Is(err, postgres.ErrFenced) {
		t.Errorf("B's Commit at a stale size: %v, want ErrConflict only", err)
	}
}

// TestLeaseExpiresByDatabaseClock: a lease is held for its TTL by the
// database's clock, and then another store takes it.
func TestLeaseExpiresByDatabaseClock(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)

	const ttl = 300 * time.Millisecond
	before := query[time.Time](t, url, "SELECT now()")
	l, err := a.AcquireLease(ctx, "a", "http://a.example.org", ttl)
	if err != nil {
		t.Fatal(err)
	}
	after := query[time.Time](t, url, "SELECT now()")
	if l.Expires.Before(before.Add(ttl)) || l.Expires.After(after.Add(ttl)) {
		t.Errorf("Expires = %v; want the database's now() at acquisition + %v, between %v and %v",
			l.Expires, ttl, before.Add(ttl), after.Add(ttl))
	}
	// B is refused until A's lease expires by the database clock: the
	// lease B gets was taken (its Expires less its TTL) no earlier.
	deadline := time.Now().Add(30 * time.Second)
	for {
		lb, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour)
		if err == nil {
			if taken := lb.Expires.Add(-hour); taken.Before(l.Expires) {
				t.Errorf("B took the lease at %v by the database clock, before A's expired at %v", taken, l.Expires)
			}
			break
		}
		if !errors.Is(err, postgres.ErrLeaseHeld) {
			t.Fatalf("B's AcquireLease: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("A's lease never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRenewLease: renewal extends the holder's lease, even one that
// expired while nobody took it; a store that holds no lease cannot renew.
func TestRenewLease(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)

	if _, err := a.RenewLease(ctx, hour); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Errorf("RenewLease without a lease: %v, want ErrLeaseLost", err)
	}
	la := acquire(t, a, "a")
	l, err := a.RenewLease(ctx, 2*hour)
	if err != nil || l.Epoch != la.Epoch || !l.Held || !l.Expires.After(la.Expires) {
		t.Errorf("RenewLease = %+v, %v; want epoch %d, held, later than %v", l, err, la.Epoch, la.Expires)
	}
	expireLease(t, url)
	l, err = a.RenewLease(ctx, hour)
	if err != nil || l.Epoch != la.Epoch || !l.Held {
		t.Errorf("RenewLease of an expired lease nobody took = %+v, %v; want it renewed at epoch %d", l, err, la.Epoch)
	}
	commit(t, a, batch(0, 2))
	if _, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour); !errors.Is(err, postgres.ErrLeaseHeld) {
		t.Errorf("B's AcquireLease after A renewed: %v, want ErrLeaseHeld", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Nanosecond} {
		if _, err := a.RenewLease(ctx, ttl); err == nil {
			t.Errorf("RenewLease(%v) succeeded", ttl)
		}
		if _, err := b.AcquireLease(ctx, "b", "http://b.example.org", ttl); err == nil || errors.Is(err, postgres.ErrLeaseHeld) {
			t.Errorf("AcquireLease(%v): %v, want a TTL error", ttl, err)
		}
	}
	if _, err := b.AcquireLease(ctx, "", "http://b.example.org", hour); err == nil {
		t.Error("AcquireLease with an empty holder succeeded")
	}
	// The same store taking its own live lease again moves the epoch.
	l, err = a.AcquireLease(ctx, "a", "http://a.example.org", hour)
	if err != nil || l.Epoch != la.Epoch+1 {
		t.Errorf("A's AcquireLease of its own lease = %+v, %v; want epoch %d", l, err, la.Epoch+1)
	}
	commit(t, a, batch(2, 1))
}

// TestReleaseLease: a released lease is taken at once by another store,
// and the releaser is fenced after that.
func TestReleaseLease(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)

	if err := b.ReleaseLease(ctx); err != nil {
		t.Errorf("ReleaseLease without a lease: %v", err)
	}
	la := acquire(t, a, "a")
	commit(t, a, batch(0, 2))
	if err := a.ReleaseLease(ctx); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	if l, err := b.CurrentLease(ctx); err != nil || l.Held || l.Epoch != la.Epoch {
		t.Errorf("CurrentLease after the release = %+v, %v; want epoch %d, not held", l, err, la.Epoch)
	}
	if _, err := a.RenewLease(ctx, hour); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Errorf("RenewLease after ReleaseLease: %v, want ErrLeaseLost", err)
	}
	lb := acquire(t, b, "b")
	if lb.Epoch != la.Epoch+1 {
		t.Errorf("B's epoch %d, want %d", lb.Epoch, la.Epoch+1)
	}
	wantFenced(t, "A's Commit after B took the released lease", a.Commit(ctx, batch(2, 1)))
	commit(t, b, batch(2, 1))
}

// TestStaleStoreFenced: a store opened before a takeover, which never took
// the lease, writes at the epoch it read at Open and is fenced after the
// takeover.
func TestStaleStoreFenced(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	stale := open(t, url)
	commit(t, stale, batch(0, 2)) // no lease ever taken: epoch 0 writes
	a := open(t, url)
	acquire(t, a, "a")
	b := batch(2, 2)
	wantFenced(t, "Commit of a store opened before the takeover", stale.Commit(ctx, b))
	checkNothingOf(t, stale, b, 2)
	wantFenced(t, "AddCheckpoint of a store opened before the takeover", stale.AddCheckpoint(ctx, 2, []byte("checkpoint 2\n")))
	if _, err := a.Checkpoint(ctx, 2); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the fenced checkpoint is stored: %v", err)
	}
	commit(t, a, b)
	// A store opened after the takeover writes at the epoch it read, until
	// the next takeover.
	late := open(t, url)
	commit(t, late, batch(4, 1))
	acquire(t, a, "a")
	wantFenced(t, "Commit of a store opened between takeovers", late.Commit(ctx, batch(5, 1)))
}

// TestSnapshotFenced: a fenced store's approval snapshot is refused with
// ErrFenced and leaves the stored one as it was.
func TestSnapshotFenced(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 3))
	if err := a.PutSnapshot(ctx, 2, []byte("a at 2")); err != nil {
		t.Fatalf("the holder's PutSnapshot: %v", err)
	}
	expireLease(t, url)
	acquire(t, b, "b")
	commit(t, b, batch(3, 1))
	wantFenced(t, "PutSnapshot of a fenced store", a.PutSnapshot(ctx, 3, []byte("a at 3")))
	if n, snap, err := b.Snapshot(ctx); err != nil || n != 2 || string(snap) != "a at 2" {
		t.Errorf("Snapshot after the fenced write = %d, %q, %v; want 2, \"a at 2\"", n, snap, err)
	}
	if err := b.PutSnapshot(ctx, 4, []byte("b at 4")); err != nil {
		t.Fatalf("the new holder's PutSnapshot: %v", err)
	}
}

// TestSnapshotDuringTakeover: B's takeover holds tree_head's lock when A
// (the holder before) writes its approval snapshot: A's write waits for
// the takeover, then is refused with ErrFenced, and the snapshot B
// writes afterwards is the one kept. (Before the fix PutSnapshot took no
// lock: A's write went through during the takeover.)
func TestSnapshotDuringTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 3))
	if err := a.PutSnapshot(ctx, 2, []byte("a at 2")); err != nil {
		t.Fatal(err)
	}
	expireLease(t, url)
	acquireDone, release := acquireHeld(ctx, t, b)
	putDone := result(func() error { return a.PutSnapshot(ctx, 3, []byte("a at 3")) })
	if err := waitForLockWaitOr(t, url, "SELECT size, epoch FROM tree_head FOR KEY SHARE%", putDone); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-acquireDone; err != nil {
		t.Fatalf("B's AcquireLease: %v", err)
	}
	wantFenced(t, "A's PutSnapshot behind the takeover", <-putDone)
	commit(t, b, batch(3, 1))
	if err := b.PutSnapshot(ctx, 4, []byte("b at 4")); err != nil {
		t.Fatal(err)
	}
	wantFenced(t, "A's PutSnapshot after B's", a.PutSnapshot(ctx, 3, []byte("a at 3")))
	if n, snap, err := b.Snapshot(ctx); err != nil || n != 4 || string(snap) != "b at 4" {
		t.Errorf("Snapshot = %d, %q, %v; want B's, 4, \"b at 4\"", n, snap, err)
	}
}

// TestSnapshotInFlightAcrossTakeover: A's PutSnapshot has read the epoch
// (its own) and is held up before its row is written (here by a trigger
// of the test's, waiting for an advisory lock) while B takes over and
// writes a newer snapshot. Whatever happens to A's write, B's newer
// snapshot is the one kept: A's, of the older epoch, never replaces it.
// (Before the fix, PutSnapshot's one statement took no lock: B's takeover
// went through, and A's write, let go, replaced B's snapshot with its
// older one.)
func TestSnapshotInFlightAcrossTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 3))
	exec(t, url, `CREATE FUNCTION hold_a() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.data = 'a at 3'::bytea THEN PERFORM pg_advisory_xact_lock_shared(7); END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER hold_a BEFORE INSERT OR UPDATE ON approval_snapshot FOR EACH ROW EXECUTE FUNCTION hold_a()`)
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	if _, err := locker.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := locker.Exec(ctx, "SELECT pg_advisory_unlock(7)"); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer unlock()
	putDone := result(func() error { return a.PutSnapshot(ctx, 3, []byte("a at 3")) })
	waitForLockWait(t, url, "%approval_snapshot%")

	expireLease(t, url)
	acquireDone := result(func() error {
		_, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour)
		return err
	})
	// With the fix, B's takeover waits for A's write (which holds
	// tree_head FOR KEY SHARE); without it, it does not.
	tookOver := false
	if err := waitForLockWaitOr(t, url, "SELECT 1 FROM tree_head FOR UPDATE%", acquireDone); err != nil {
		if !errors.Is(err, errReturned) {
			t.Fatal(err)
		}
		tookOver = true
		commit(t, b, batch(3, 1))
		if err := b.PutSnapshot(ctx, 4, []byte("b at 4")); err != nil {
			t.Fatal(err)
		}
	}
	unlock()
	errA := <-putDone
	if !tookOver {
		if err := <-acquireDone; err != nil {
			t.Fatalf("B's AcquireLease: %v", err)
		}
		commit(t, b, batch(3, 1))
		if err := b.PutSnapshot(ctx, 4, []byte("b at 4")); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("A's PutSnapshot in flight across the takeover: %v", errA)
	if n, snap, err := b.Snapshot(ctx); err != nil || n != 4 || string(snap) != "b at 4" {
		t.Errorf("Snapshot = %d, %q, %v; want B's, 4, \"b at 4\" (A's older one replaced it)", n, snap, err)
	}
}

// errReturned: what waitForLockWaitOr waited on returned first.
var errReturned = errors.New("returned before waiting for a lock")

// waitForLockWaitOr waits until a backend whose query is LIKE pattern
// waits for a lock, or done has a result (then the error wraps
// errReturned and says what it was).
func waitForLockWaitOr(t *testing.T, url, pattern string, done <-chan error) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, pattern).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("%w (%v), not waiting for a lock as %q", errReturned, err, pattern)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no statement like %q waited for a lock", pattern)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentAcquire: stores racing for an expired lease: exactly one
// wins each round, the others are refused with ErrLeaseHeld, and the
// epochs of the lease and tree_head move together, by one per round.
func TestConcurrentAcquire(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	const n = 8
	stores := make([]*postgres.Store, n)
	for i := range stores {
		s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	size := uint64(0)
	last := uint64(0)
	for round := range 10 {
		expireLease(t, url)
		var wg sync.WaitGroup
		start := make(chan struct{})
		leases := make([]postgres.Lease, n)
		errs := make([]error, n)
		for i, s := range stores {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = s.AcquireLease(ctx, fmt.Sprintf("s%d", i), fmt.Sprintf("http://s%d.example.org", i), hour)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: both s%d (epoch %d) and s%d (epoch %d) took the lease",
					round, winner, leases[winner].Epoch, i, leases[i].Epoch)
			case err == nil:
				winner = i
			case !errors.Is(err, postgres.ErrLeaseHeld):
				t.Fatalf("round %d: s%d: %v, want ErrLeaseHeld", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody took the expired lease", round)
		}
		if e := leases[winner].Epoch; e != last+1 {
			t.Fatalf("round %d: epoch %d after %d", round, e, last)
		}
		last = leases[winner].Epoch
		if le, he := epochs(t, url); le != int64(last) || he != int64(last) {
			t.Fatalf("round %d: lease epoch %d, tree_head epoch %d; want %d", round, le, he, last)
		}
		for i, s := range stores {
			if i != winner {
				wantFenced(t, fmt.Sprintf("round %d: loser s%d's Commit", round, i), s.Commit(ctx, batch(size, 1)))
			}
		}
		commit(t, stores[winner], batch(size, 1))
		size++
	}
}

// hold makes s stop at the hook point until release is called (at the
// latest when the test ends); entered is closed once s got there.
func hold(t *testing.T, s *postgres.Store, point string) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once, inOnce sync.Once
	postgres.SetHook(s, func(p string) {
		if p != point {
			return
		}
		first := false
		inOnce.Do(func() { first = true; close(in) })
		if first {
			<-out
		}
	})
	release = func() { once.Do(func() { close(out) }) }
	t.Cleanup(release)
	return in, release
}

// result runs f in a goroutine and returns its outcome's channel.
// acquireHeld starts b's AcquireLease as "b" and returns once it holds
// tree_head's lock inside its transaction (hold's "acquire" point), with
// its result and the release that lets it go on.
func acquireHeld(ctx context.Context, t *testing.T, b *postgres.Store) (acquireDone <-chan error, release func()) {
	entered, release := hold(t, b, "acquire")
	acquireDone = result(func() error {
		_, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour)
		return err
	})
	<-entered
	return acquireDone, release
}

func result(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

func notYet(t *testing.T, what string, c <-chan error) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("%s returned (%v) while it should wait for tree_head's lock", what, err)
	default:
	}
}

// TestCommitInFlightDuringTakeover: A's commit holds tree_head's lock when
// B takes the lease: B waits for it, and A's batch is in the log B
// continues.
func TestCommitInFlightDuringTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 2))

	entered, release := hold(t, a, "commit")
	inFlight := batch(2, 3, "k2", "k3", "k4")
	commitDone := result(func() error { return a.Commit(ctx, inFlight) })
	<-entered
	expireLease(t, url)
	var lb postgres.Lease
	acquireDone := result(func() (err error) {
		lb, err = b.AcquireLease(ctx, "b", "http://b.example.org", hour)
		return err
	})
	waitForLockWait(t, url, "SELECT 1 FROM tree_head FOR UPDATE%")
	notYet(t, "B's AcquireLease", acquireDone)
	release()
	if err := <-commitDone; err != nil {
		t.Fatalf("A's in-flight Commit: %v", err)
	}
	if err := <-acquireDone; err != nil {
		t.Fatalf("B's AcquireLease: %v", err)
	}
	if lb.Epoch != 2 {
		t.Errorf("B's epoch %d, want 2", lb.Epoch)
	}
	if st, err := b.State(ctx); err != nil || st.Size != 5 {
		t.Errorf("State = %+v, %v; want A's batch in (size 5)", st, err)
	}
	commit(t, b, batch(5, 1))
	wantFenced(t, "A's next Commit", a.Commit(ctx, batch(6, 1)))
}

// TestTakeoverBeforeCommit: B's takeover holds tree_head's lock when A
// commits: A's commit waits for it, then is refused with ErrFenced and
// writes nothing.
func TestTakeoverBeforeCommit(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 2))
	expireLease(t, url)

	acquireDone, release := acquireHeld(ctx, t, b)
	late := batch(2, 3, "k2", "k3", "k4")
	commitDone := result(func() error { return a.Commit(ctx, late) })
	waitForLockWait(t, url, "BEGIN;%EXECUTE ledger_move%")
	notYet(t, "A's Commit", commitDone)
	release()
	if err := <-acquireDone; err != nil {
		t.Fatalf("B's AcquireLease: %v", err)
	}
	wantFenced(t, "A's Commit behind the takeover", <-commitDone)
	checkNothingOf(t, a, late, 2)
	commit(t, b, batch(2, 3, "k2", "k3", "k4"))
}

// TestCheckpointInFlightDuringTakeover: AddCheckpoint and AcquireLease
// order on tree_head's row like Commit does: an AddCheckpoint in flight
// is in before the takeover, one behind it is refused; and an
// AddCheckpoint in flight does not hold up a Commit.
func TestCheckpointInFlightDuringTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 4))

	entered, release := hold(t, a, "checkpoint")
	cpDone := result(func() error { return a.AddCheckpoint(ctx, 2, []byte("checkpoint 2\n")) })
	<-entered
	// A Commit does not wait for the checkpoint's lock on tree_head.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := a.Commit(cctx, batch(4, 1)); err != nil {
		t.Fatalf("Commit while an AddCheckpoint holds its lock: %v", err)
	}
	cancel()
	expireLease(t, url)
	acquireDone := result(func() error {
		_, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour)
		return err
	})
	waitForLockWait(t, url, "SELECT 1 FROM tree_head FOR UPDATE%")
	notYet(t, "B's AcquireLease", acquireDone)
	release()
	if err := <-cpDone; err != nil {
		t.Fatalf("A's in-flight AddCheckpoint: %v", err)
	}
	if err := <-acquireDone; err != nil {
		t.Fatalf("B's AcquireLease: %v", err)
	}

	// The other way round: C's takeover holds tree_head's lock when B
	// adds a checkpoint.
	c := open(t, url)
	expireLease(t, url)
	entered, release = hold(t, c, "acquire")
	acquireDone = result(func() error {
		_, err := c.AcquireLease(ctx, "c", "http://c.example.org", hour)
		return err
	})
	<-entered
	cpDone = result(func() error { return b.AddCheckpoint(ctx, 5, []byte("checkpoint 5\n")) })
	waitForLockWait(t, url, "SELECT t.size, t.epoch%")
	notYet(t, "B's AddCheckpoint", cpDone)
	release()
	if err := <-acquireDone; err != nil {
		t.Fatalf("C's AcquireLease: %v", err)
	}
	wantFenced(t, "B's AddCheckpoint behind C's takeover", <-cpDone)
	if _, err := c.Checkpoint(ctx, 5); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the fenced checkpoint is stored: %v", err)
	}
	if err := c.AddCheckpoint(ctx, 5, []byte("checkpoint 5\n")); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromVersion1: a database at schema version 1, with entries,
// tiles and a checkpoint, migrates to the latest version at Open with its data
// intact, at epoch 0 with the lease never taken, and takes commits and
// leases after.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	v1, err := os.ReadFile("migrations/0001_initial.sql")
	if err != nil {
		t.Fatal(err)
	}
	// What a version-1 build left: its migration, recorded, and a log of
	// two entries with a checkpoint.
	exec(t, url, `CREATE TABLE schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	exec(t, url, string(v1))
	exec(t, url, "INSERT INTO schema_migrations (version, name) VALUES (1, 'initial')")
	old := batch(0, 2, "k0", "")
	for i, e := range old.Entries {
		key := "NULL"
		if len(old.Keys[i]) > 0 {
			key = fmt.Sprintf("'\\x%x'", old.Keys[i])
		}
		exec(t, url, fmt.Sprintf("INSERT INTO entries (idx, leaf_hash, idem_key, data) VALUES (%d, '\\x%x', %s, '\\x%x')",
			i, old.LeafHashes[i], key, e))
	}
	exec(t, url, fmt.Sprintf("INSERT INTO tiles (level, idx, hashes) VALUES (0, 0, '\\x%x')", old.Tiles[0].Hashes))
	exec(t, url, "INSERT INTO checkpoints (size, signed) VALUES (2, 'checkpoint 2\n')")
	exec(t, url, "UPDATE tree_head SET size = 2")

	s := open(t, url)
	if v, latest := query[int32](t, url, "SELECT max(version) FROM schema_migrations"), postgres.LatestVersion(t); v != int32(latest) {
		t.Errorf("schema version %d after Open, want %d", v, latest)
	}
	st, err := s.State(ctx)
	if err != nil || st.Size != 2 || st.CheckpointSize != 2 || string(st.Checkpoint) != "checkpoint 2\n" {
		t.Errorf("State = %+v, %v; want size 2 and the checkpoint", st, err)
	}
	for i, e := range old.Entries {
		if got, err := s.Entry(ctx, uint64(i)); err != nil || !bytes.Equal(got, e) {
			t.Errorf("Entry(%d) = %.20q, %v", i, got, err)
		}
		if got, err := s.IndexOf(ctx, sha256.Sum256(append([]byte{0}, e...))); err != nil || got != uint64(i) {
			t.Errorf("IndexOf(leaf %d) = %d, %v", i, got, err)
		}
	}
	if i, err := s.IndexOfKey(ctx, []byte("k0")); err != nil || i != 0 {
		t.Errorf("IndexOfKey(k0) = %d, %v", i, err)
	}
	if tl, err := s.Tile(ctx, 0, 0); err != nil || !bytes.Equal(tl, old.Tiles[0].Hashes) {
		t.Errorf("Tile(0, 0) = %x, %v", tl, err)
	}
	if le, he := epochs(t, url); le != 0 || he != 0 {
		t.Errorf("epochs after the migration: lease %d, tree_head %d; want 0", le, he)
	}
	if l, err := s.CurrentLease(ctx); err != nil || l != (postgres.Lease{}) {
		t.Errorf("CurrentLease after the migration = %+v, %v; want the zero Lease", l, err)
	}
	commit(t, s, batch(2, 1, "k2"))
	acquire(t, s, "a")
	commit(t, s, batch(3, 1, "k3"))
	if _, err := s.IndexOfKey(ctx, []byte("k0")); err != nil {
		t.Errorf("IndexOfKey(k0) after commits: %v", err)
	}
}
