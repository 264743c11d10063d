package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// cutStall is the StallTimeout of the stores cut off in these tests, and
// cutBound what a takeover may take beyond it: generous, for a loaded
// machine; a takeover held off by the cut-off store waits until the
// proxy is released, so a failure shows as this bound passing.
const (
	cutStall = 500 * time.Millisecond
	cutBound = 10 * time.Second
)

// cutOp is a write of the lease holder A (through a proxy that may stop
// carrying its bytes) at the log's size.
type cutOp struct {
	name string
	// holds: A holds the lease before run (else the lease has expired,
	// and run is A's attempt to take it).
	holds bool
	// grows is how many entries run commits.
	grows uint64
	run   func(ctx context.Context, a *postgres.Store, size uint64) error
}

var cutOps = []cutOp{
	{"Commit", true, 300, func(ctx context.Context, a *postgres.Store, size uint64) error {
		// Big (~200 KiB), with keys: the takeover commits the same
		// indices and keys after.
		return a.Commit(ctx, tagged(batch(size, 300, cutKeys(size, 300)...), "by a"))
	}},
	{"AddCheckpoint", true, 0, func(ctx context.Context, a *postgres.Store, size uint64) error {
		return a.AddCheckpoint(ctx, size, fmt.Appendf(nil, "checkpoint %d by a\n", size))
	}},
	{"PutSnapshot", true, 0, func(ctx context.Context, a *postgres.Store, size uint64) error {
		return a.PutSnapshot(ctx, size, []byte("snapshot by a"))
	}},
	{"RenewLease", true, 0, func(ctx context.Context, a *postgres.Store, size uint64) error {
		_, err := a.RenewLease(ctx, hour)
		return err
	}},
	{"AcquireLease", false, 0, func(ctx context.Context, a *postgres.Store, size uint64) error {
		_, err := a.AcquireLease(ctx, "a", "http://a.example.org", hour)
		return err
	}},
}

// cutKeys returns n idempotency keys for the entries at start.
func cutKeys(start uint64, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", start+uint64(i))
	}
	return keys
}

// tagged returns b with its entries' bytes (and leaf hashes) changed by
// tag, so that whose entries are stored can be told.
func tagged(b ledger.Batch, tag string) ledger.Batch {
	for i, e := range b.Entries {
		b.Entries[i] = []byte(strings.Replace(string(e), `"pad":"x`, `"pad":"`+tag, 1))
		b.LeafHashes[i] = sha256.Sum256(append([]byte{0}, b.Entries[i]...))
	}
	return b
}

// TestCutOffHolder: the holder A's connection stops carrying bytes, both
// ways, at every point of each of its writes (before each message it
// sends, and half-way through each), and A never resumes (its process
// is gone, or its network stays cut; its lease expires). Each time,
// another store B takes the lease within StallTimeout plus cutBound,
// continues the log with A's indices and keys (nothing of A's write
// holds a lock or a row), and A's write, which gives up by itself
// (Commit) or with its caller's deadline, leaves nothing.
//
// Before the fix, a Commit cut off after its pipeline's UPDATE had
// reached the server held tree_head's row lock, the server waiting for
// the rest of the pipeline (active, ClientRead), where neither
// idle_in_transaction_session_timeout nor statement_timeout applies: B
// waited until the connection ended (TCP keepalive, hours).
func TestCutOffHolder(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, op := range cutOps {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel() // each on a database and a proxy of its own
			url := srv.NewDatabase(t)
			proxy := srv.NewProxy(t)
			b := open(t, url)
			acquire(t, b, "b")
			commit(t, b, batch(0, 2))
			size := uint64(2)

			// The messages of op, recorded once; each run cuts at one
			// point of them.
			var msgs []pgtest.Message
			cutOffRun(t, url, proxy, op, b, &size, func(m pgtest.Message) bool {
				msgs = append(msgs, pgtest.Message{Type: m.Type, Data: m.Data[:min(len(m.Data), 64)]})
				return false
			}, -1)
			if len(msgs) == 0 {
				t.Fatalf("%s sent nothing through the proxy", op.name)
			}
			var kinds []string
			for _, m := range msgs {
				kinds = append(kinds, string(m.Type))
			}
			t.Logf("%s sends %d messages: %s", op.name, len(msgs), strings.Join(kinds, " "))
			for i, m := range msgs {
				for _, half := range []bool{false, true} {
					keep, where := 0, fmt.Sprintf("before message %d (%c)", i, m.Type)
					if half {
						keep, where = len(m.Data)/2, fmt.Sprintf("half-way through message %d (%c)", i, m.Type)
						if m.Type == 'S' {
							continue
						}
					}
					t.Run(where, func(t *testing.T) {
						n := 0
						cutOffRun(t, url, proxy, op, b, &size, func(pgtest.Message) bool {
							n++
							return n-1 == i
						}, keep)
					})
					if t.Failed() {
						return
					}
				}
			}
		})
	}
}

// isPing reports whether m is pgx's ping, which the pool sends before
// handing out a connection idle for more than a second: not part of a
// write.
func isPing(m pgtest.Message) bool {
	return m.Type == 'Q' && strings.Contains(string(m.Data), "-- ping")
}

// cutOffRun opens A through the proxy (one connection), gives it the
// lease (or, for an op that takes it, lets it expire), runs op once
// unhindered, then again with the proxy armed: the first message for
// which at returns true is cut after keep bytes (keep < 0: none is). B
// then takes over, within StallTimeout + cutBound, and commits at A's
// size with A's keys; A's op fails if it was cut off. B holds the lease
// afterwards, and size is the log's.
func cutOffRun(t *testing.T, url string, proxy *pgtest.Proxy, op cutOp, b *postgres.Store, size *uint64, at func(pgtest.Message) bool, keep int) {
	t.Helper()
	ctx := t.Context()
	a, err := postgres.Open(ctx, proxy.URL(url), postgres.Options{MaxConns: 1, StallTimeout: cutStall})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Before a.Close, which waits for A's connection: the stalled
	// connection is let go first, as stopping the proxy would.
	defer proxy.Release()
	expireLease(t, url)
	if op.holds {
		acquire(t, a, "a")
	}
	// Once unhindered (a checkpoint or snapshot for the size before), so
	// that the armed run's messages are those of a connection that made
	// the same write before.
	if err := op.run(ctx, a, *size-1+min(op.grows, 1)); err != nil {
		t.Fatalf("%s, unhindered: %v", op.name, err)
	}
	*size += op.grows
	if !op.holds {
		expireLease(t, url)
	}
	proxy.Stall(func(_, _ int, m pgtest.Message) int {
		if isPing(m) || !at(m) {
			return -1
		}
		return keep
	})
	// Cut off, A's op has its caller's deadline, as ledgerd gives its
	// lease calls; Commit needs none (it bounds itself).
	cutOff := keep >= 0
	octx := ctx
	if cutOff && op.name != "Commit" {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, 2*cutStall)
		defer cancel()
	}
	opDone := result(func() error { return op.run(octx, a, *size) })
	if cutOff {
		select {
		case <-proxy.Stalled():
		case err := <-opDone:
			t.Fatalf("%s returned (%v) before the proxy cut it off", op.name, err)
		case <-time.After(cutBound):
			t.Fatalf("%s did not reach the cut in %v", op.name, cutBound)
		}
	} else {
		if err := <-opDone; err != nil {
			t.Fatalf("%s through the proxy: %v", op.name, err)
		}
		*size += op.grows
	}
	proxy.Stall(nil)

	// A's process is gone: its lease expires, and B takes over.
	expireLease(t, url)
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, cutStall+cutBound)
	defer cancel()
	if _, err := b.AcquireLease(bctx, "b", "http://b.example.org", hour); err != nil {
		t.Fatalf("B's takeover, %v after the cut-off: %v (want it within StallTimeout %v + %v)",
			time.Since(start).Round(time.Millisecond), err, cutStall, cutBound)
	}
	took := time.Since(start)
	// Nothing of A's holds B back: B commits at A's indices, with A's keys.
	cctx, cancel := context.WithTimeout(ctx, cutStall+cutBound)
	defer cancel()
	if err := b.Commit(cctx, tagged(batch(*size, 300, cutKeys(*size, 300)...), "by b")); err != nil {
		t.Fatalf("B's Commit at %d after the takeover: %v", *size, err)
	}
	if cutOff {
		t.Logf("B took over %v after the cut-off, and committed in %v", took.Round(time.Millisecond), (time.Since(start) - took).Round(time.Millisecond))
	}

	if cutOff {
		// A's Commit gives up by itself (each round trip bounded by
		// twice StallTimeout); the other ops have their caller's
		// deadline, and once the proxy lets the connection go, end.
		if op.name != "Commit" {
			proxy.Release()
		}
		select {
		case err := <-opDone:
			if err == nil && op.name == "Commit" {
				t.Errorf("A's Commit, cut off, succeeded")
			}
		case <-time.After(4*cutStall + cutBound):
			t.Fatalf("A's %s did not return %v after the cut-off", op.name, 4*cutStall+cutBound)
		}
	}
	if e, err := b.Entry(ctx, *size); err != nil || !strings.Contains(string(e), `"pad":"by b`) {
		t.Errorf("entry %d after the takeover = %.40q, %v; want B's", *size, e, err)
	}
	if i, err := b.IndexOfKey(ctx, []byte(cutKeys(*size, 1)[0])); err != nil || i != *size {
		t.Errorf("IndexOfKey(B's first key) = %d, %v; want %d", i, err, *size)
	}
	*size += 300
}
