package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/internal/witnesstest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/storage/postgres"
)

// The PostgreSQL store, which stays in storage/postgres, is a Store.
var _ Store = (*postgres.Store)(nil)

// TestCosignatureStore is the Store contract, run on both
// implementations: the store_dir File and the PostgreSQL table.
func TestCosignatureStore(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cosigned-checkpoint")
		l := cosignedLedger(t, memory.New())
		testCosignatureStore(t, l, func() Store { return NewFile(path, l.CheckpointAt) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		l := cosignedLedger(t, openPG(t, url))
		testCosignatureStore(t, l, func() Store { return openPG(t, url) })
	})
}

func openPG(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// cosignedLedger is a log on store with checkpoints signed at sizes 3
// and 7.
func cosignedLedger(t *testing.T, store ledger.Store) *ledger.Ledger {
	t.Helper()
	l := openLog(t, store, testKey(t))
	for i := range 7 {
		if _, err := l.Append(t.Context(), record(t, i)); err != nil {
			t.Fatal(err)
		}
		if i == 2 || i == 6 {
			if _, err := l.Publish(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// sigLine is a signature line by the key of name and hash, with random
// signature bytes (stores keep lines; they do not verify them), and its
// key ID.
func sigLine(name string, hash uint32) ([]byte, string) {
	sig := make([]byte, 4+8+64)
	binary.BigEndian.PutUint32(sig, hash)
	rand.Read(sig[4:])
	return []byte("— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"), fmt.Sprintf("%s+%08x", name, hash)
}

func testCosignatureStore(t *testing.T, l *ledger.Ledger, open func() Store) {
	ctx := t.Context()
	s := open()
	a3, a := sigLine("witness-a.example.org", 0x0a0a0a0a)
	b3, b := sigLine("witness-b.example.org", 0xb0b0b0b0)
	a7, _ := sigLine("witness-a.example.org", 0x0a0a0a0a)
	a7again, _ := sigLine("witness-a.example.org", 0x0a0a0a0a)
	want := func(what string, s Store, size uint64, lines map[string][]byte) {
		t.Helper()
		got, err := s.Cosignatures(ctx, size)
		if err != nil || got == nil || !maps.EqualFunc(got, lines, bytes.Equal) {
			t.Errorf("%s: Cosignatures(%d) = %q, %v; want %q", what, size, got, err, lines)
		}
	}
	wantLatest := func(what string, s Store, witness string, size uint64) {
		t.Helper()
		latest, err := s.LatestCosignatures(ctx)
		if err != nil || latest[witness] != size {
			t.Errorf("%s: LatestCosignatures = %v, %v; want %s at %d", what, latest, err, witness, size)
		}
	}

	if latest, err := s.LatestCosignatures(ctx); err != nil || len(latest) != 0 {
		t.Errorf("an empty store's LatestCosignatures = %v, %v", latest, err)
	}
	want("empty", s, 3, map[string][]byte{})

	for _, put := range []struct {
		witness string
		line    []byte
	}{{a, a3}, {b, b3}} {
		if err := s.PutCosignature(ctx, 3, put.witness, put.line); err != nil {
			t.Fatalf("PutCosignature(3, %s): %v", put.witness, err)
		}
	}
	want("two witnesses at 3", s, 3, map[string][]byte{a: a3, b: b3})
	wantLatest("two witnesses at 3", s, a, 3)
	wantLatest("two witnesses at 3", s, b, 3)
	// The caller's copy: changing it changes nothing kept.
	got, _ := s.Cosignatures(ctx, 3)
	got[a][3] ^= 1
	want("after the caller changed its copy", s, 3, map[string][]byte{a: a3, b: b3})

	if err := s.PutCosignature(ctx, 7, a, a7); err != nil {
		t.Fatal(err)
	}
	want("a at 7", s, 7, map[string][]byte{a: a7})
	wantLatest("a at 7", s, a, 7)
	if latest, _ := s.LatestCosignatures(ctx); latest[b] != 0 && latest[b] != 3 {
		t.Errorf("b's latest is %d; it cosigned size 3 only", latest[b])
	}
	// The same witness and size again: the new line replaces the old.
	if err := s.PutCosignature(ctx, 7, a, a7again); err != nil {
		t.Fatal(err)
	}
	want("a at 7 again", s, 7, map[string][]byte{a: a7again})

	// A size the log signed no checkpoint for is refused, and nothing
	// changes.
	if err := s.PutCosignature(ctx, 5, b, b3); err == nil {
		t.Error("PutCosignature for size 5, which has no checkpoint, succeeded")
	}
	want("after a refused put", s, 5, map[string][]byte{})
	want("after a refused put", s, 7, map[string][]byte{a: a7again})
	wantLatest("after a refused put", s, a, 7)

	// Kept across a reopen.
	s = open()
	want("reopened", s, 7, map[string][]byte{a: a7again})
	wantLatest("reopened", s, a, 7)
}

// onPG is a log on PostgreSQL with two fake witnesses, whose Set keeps
// the cosignatures in the database.
type onPG struct {
	url  string
	key  *ledger.Key
	l    *ledger.Ledger
	fws  []*witnesstest.Witness
	ws   []Witness
	set  *Set
	stop func() // stops set's submissions
	// db is a store of its own on the database.
	db *postgres.Store
}

// waitKept waits until the database holds a cosignature by each of n
// witnesses for size.
func waitKept(t *testing.T, store *postgres.Store, n int, size uint64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the database to hold %d cosignatures for size %d", n, size), func() bool {
		lines, err := store.Cosignatures(t.Context(), size)
		return err == nil && len(lines) == n
	})
}

// cosignedOnPG runs a log on PostgreSQL with two fake witnesses, appends
// five entries and waits until both witnesses' cosignatures of that size
// are held and kept in the database.
func cosignedOnPG(t *testing.T) (p *onPG, size uint64, cosigned []byte) {
	t.Helper()
	p = &onPG{url: pgtest.Shared(t).NewDatabase(t), key: testKey(t)}
	store := openPG(t, p.url)
	p.l = openLog(t, store, p.key)
	p.fws, p.ws = fakeWitnesses(t, p.key, 2)
	p.set = newSet(t, Options{Witnesses: p.ws, Log: p.l, Store: store})
	p.stop = run(t, p.set)
	size = appendN(t, p.l, 0, 5)
	cosigned = waitCosignatures(t, p.l, p.set, size, 2)
	p.db = openPG(t, p.url)
	waitKept(t, p.db, len(p.fws), size)
	return p, size, cosigned
}

// pgConn is a connection to the database at url, closed with the test.
func pgConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestWitnessCosignaturesInDatabase: on PostgreSQL the sequencer keeps
// each cosignature in the database; another sequencer over the same
// database (a takeover) serves them at once, its witnesses know the size
// each cosigned, and the witnesses are then sent a proof from there, not
// asked again (no 409); a follower serves them, verified.
func TestWitnessCosignaturesInDatabase(t *testing.T) {
	p, size, cp := cosignedOnPG(t)

	// A sequencer that starts now: its witnesses cannot be reached, and it
	// holds both cosignatures at once.
	next, err := New(t.Context(), Options{Witnesses: unreachable(p.ws), Log: p.l, Store: p.db})
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := p.l.Checkpoint()
	if got := next.Cosigned(t.Context(), latest, size); !bytes.Equal(got, cp) {
		t.Fatalf("a new sequencer serves\n%s\nwant\n%s", got, cp)
	}
	for _, w := range next.Snapshot().Witnesses {
		if w.Cosigned != size {
			t.Errorf("a new sequencer's witness %s starts from size %d, want %d", w.Name, w.Cosigned, size)
		}
	}

	// A new sequencer with the real witnesses (the first one stopped):
	// after more appends each witness is sent the proof from the size it
	// cosigned, read from the database, and answers at once.
	p.stop()
	before := witnesstest.Conflicts(p.fws)
	next = newSet(t, Options{Witnesses: p.ws, Log: p.l, Store: p.db})
	run(t, next)
	size = appendN(t, p.l, 5, 3)
	waitUntil(t, "the new sequencer's cosignatures", func() bool { return next.complete(size) })
	if n := witnesstest.Conflicts(p.fws) - before; n != 0 {
		t.Errorf("the witnesses answered 409 %d times to a sequencer that read their sizes from the database", n)
	}
	waitKept(t, p.db, len(p.fws), size)

	// A third sequencer serves the cosignatures of the earlier
	// checkpoint too, read from the database when asked.
	third := newSet(t, Options{Witnesses: unreachable(p.ws), Log: p.l, Store: p.db})
	if got, n := third.Cosignatures(t.Context(), 5); n != 2 || !bytes.HasSuffix(cp, got) {
		t.Errorf("a new sequencer serves %d cosignatures for an earlier checkpoint:\n%s", n, got)
	}

	// A follower over its own view of the log serves the latest
	// checkpoint with both, read from the database.
	follower, fl := followerSet(t, p)
	fcp, fsize := fl.Checkpoint()
	if fsize != size {
		t.Fatalf("the follower's view is at size %d, want %d", fsize, size)
	}
	if _, n := follower.Cosignatures(t.Context(), fsize); n != 2 {
		t.Errorf("a follower serves %d cosignatures for the latest checkpoint, want 2:\n%s", n, follower.Cosigned(t.Context(), fcp, fsize))
	}
	if got, n := follower.Cosignatures(t.Context(), 5); n != 2 || !bytes.HasSuffix(cp, got) {
		t.Errorf("a follower serves %d cosignatures for an earlier checkpoint:\n%s", n, got)
	}
}

// followerSet is a follower's Set over p's log on the database: its own
// store and ledger.Follow view, its witnesses unreachable.
func followerSet(t *testing.T, p *onPG) (*Set, *ledger.Ledger) {
	t.Helper()
	store := openPG(t, p.url)
	fl, err := ledger.Follow(t.Context(), store, p.key, ledger.Options{Logger: discard(), FollowInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	s, err := New(t.Context(), Options{Witnesses: unreachable(p.ws), Log: fl, Store: store, Following: true, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return s, fl
}

// TestWitnessRestartConflict: a sequencer whose database holds no
// cosignature (they were lost, or never kept) sends "old 0"; the witnesses
// answer 409 with their sizes, and it catches up from there.
func TestWitnessRestartConflict(t *testing.T) {
	p, _, _ := cosignedOnPG(t)
	conn := pgConn(t, p.url)
	if _, err := conn.Exec(t.Context(), "DELETE FROM cosignatures"); err != nil {
		t.Fatal(err)
	}
	p.stop()
	before := witnesstest.Conflicts(p.fws)
	s := newSet(t, Options{Witnesses: p.ws, Log: p.l, Store: p.db})
	run(t, s)
	size := appendN(t, p.l, 5, 2)
	waitUntil(t, "the cosignatures after the conflicts", func() bool { return s.complete(size) })
	if n := witnesstest.Conflicts(p.fws) - before; n < len(p.fws) {
		t.Errorf("%d answers 409 from %d witnesses to a sequencer that did not know their sizes", n, len(p.fws))
	}
}

// TestFollowerRefusesTamperedCosignature: a line in the database that
// does not verify with the witness's key (a byte flipped) is never served:
// not by a follower, nor by a new sequencer, which gathers it again.
func TestFollowerRefusesTamperedCosignature(t *testing.T) {
	p, size, _ := cosignedOnPG(t)
	lines, _ := p.db.Cosignatures(t.Context(), size)
	id := p.ws[1].Key.ID() // w1's
	tampered := witnesstest.FlipSignatureByte(t, lines[id])
	conn := pgConn(t, p.url)
	if tag, err := conn.Exec(t.Context(), "UPDATE cosignatures SET line = $1 WHERE size = $2 AND witness = $3", tampered, int64(size), id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tampering with w1's row: %v %v", tag, err)
	}

	follower, fl := followerSet(t, p)
	cp, _ := fl.Checkpoint()
	got, n := follower.Cosignatures(t.Context(), size)
	if n != 1 || bytes.Contains(got, tampered) || !bytes.Contains(got, lines[p.ws[0].Key.ID()]) {
		t.Errorf("a follower serves %d cosignatures with a tampered row:\n%s", n, follower.Cosigned(t.Context(), cp, size))
	}
	// The follow loop's read, again: still refused.
	if err := follower.read(t.Context(), size); err != nil {
		t.Fatal(err)
	}
	if got, n := follower.Cosignatures(t.Context(), size); n != 1 || bytes.Contains(got, tampered) {
		t.Errorf("after another read, a follower serves %d cosignatures with a tampered row:\n%s", n, got)
	}

	next := newSet(t, Options{Witnesses: unreachable(p.ws), Log: p.l, Store: p.db})
	if got, n := next.Cosignatures(t.Context(), size); n != 1 || bytes.Contains(got, tampered) {
		t.Errorf("a new sequencer serves %d cosignatures with a tampered row:\n%s", n, got)
	}
	if w := witnessSnapshot(t, next, "w1"); w.Cosigned != 0 {
		t.Errorf("a new sequencer takes w1's size %d from a line that does not verify", w.Cosigned)
	}
}

// TestFollowerCatchesUpCosignatures: a follower that holds some of its
// latest checkpoint's cosignatures serves a witness's that reaches the
// database later, read by its loop.
func TestFollowerCatchesUpCosignatures(t *testing.T) {
	p, size, _ := cosignedOnPG(t)
	lines, _ := p.db.Cosignatures(t.Context(), size)
	id := p.ws[1].Key.ID()
	conn := pgConn(t, p.url)
	// w1's cosignature is not in the database yet.
	if _, err := conn.Exec(t.Context(), "DELETE FROM cosignatures WHERE witness = $1", id); err != nil {
		t.Fatal(err)
	}
	follower, _ := followerSet(t, p)
	if _, n := follower.Cosignatures(t.Context(), size); n != 1 {
		t.Fatalf("the follower serves %d cosignatures, want w0's", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); follower.Follow(ctx, func() bool { return false }) }()
	defer func() { cancel(); <-done }()
	if _, err := conn.Exec(t.Context(), "INSERT INTO cosignatures (size, witness, line) VALUES ($1, $2, $3)", int64(size), id, lines[id]); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the follower to serve w1's cosignature", func() bool {
		_, n := follower.Cosignatures(t.Context(), size)
		return n == 2
	})
}
