package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/internal/witnesstest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestCosignatureStore is the cosignatureStore contract, run on both
// implementations: the store_dir file and the PostgreSQL table.
func TestCosignatureStore(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), cosignedFileName)
		l := cosignedLedger(t, memory.New())
		testCosignatureStore(t, l, func() cosignatureStore { return newCosignedFile(path, l.CheckpointAt) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		l := cosignedLedger(t, openPG(t, url))
		testCosignatureStore(t, l, func() cosignatureStore { return openPG(t, url) })
	})
}

func openPG(t *testing.T, url string) *postgres.Store {
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
	dir := t.TempDir()
	path, _, err := initDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range 7 {
		if _, err := l.Append(t.Context(), mustRecord(t, appendBody(i))); err != nil {
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

func testCosignatureStore(t *testing.T, l *ledger.Ledger, open func() cosignatureStore) {
	ctx := t.Context()
	s := open()
	a3, a := sigLine("witness-a.example.org", 0x0a0a0a0a)
	b3, b := sigLine("witness-b.example.org", 0xb0b0b0b0)
	a7, _ := sigLine("witness-a.example.org", 0x0a0a0a0a)
	a7again, _ := sigLine("witness-a.example.org", 0x0a0a0a0a)
	want := func(what string, s cosignatureStore, size uint64, lines map[string][]byte) {
		t.Helper()
		got, err := s.Cosignatures(ctx, size)
		if err != nil || got == nil || !maps.EqualFunc(got, lines, bytes.Equal) {
			t.Errorf("%s: Cosignatures(%d) = %q, %v; want %q", what, size, got, err, lines)
		}
	}
	wantLatest := func(what string, s cosignatureStore, witness string, size uint64) {
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

// pgWitnessServer is witnessServer on a PostgreSQL store: its witnesses
// keep the cosignatures in the database.
func pgWitnessServer(t *testing.T, n int) (*testServer, []*witnesstest.Witness, string) {
	t.Helper()
	url := pgtest.Shared(t).NewDatabase(t)
	var ws []*witnesstest.Witness
	s := startServerOn(t, func(c *Config) { ws = addFakeWitnesses(t, c, n) }, openPG(t, url))
	return s, ws, url
}

// unreachable is cfg with every witness's URL changed to one that does not
// answer: a witnesses set made from it serves only what it reads.
func unreachable(cfg *Config) *Config {
	c := *cfg
	c.Witnesses = append([]WitnessConfig(nil), cfg.Witnesses...)
	for i := range c.Witnesses {
		c.Witnesses[i].URL = "http://127.0.0.1:1"
	}
	return &c
}

// waitKept waits until the database holds a cosignature by each of ws for
// size.
func waitKept(t *testing.T, store *postgres.Store, ws []*witnesstest.Witness, size uint64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the database to hold %d cosignatures for size %d", len(ws), size), func() bool {
		lines, err := store.Cosignatures(t.Context(), size)
		return err == nil && len(lines) == len(ws)
	})
}

// cosignedOnPG serves a ledger on PostgreSQL with two fake witnesses,
// appends five entries and waits until both witnesses' cosignatures of
// that size are served and kept in the database.
func cosignedOnPG(t *testing.T) (s *testServer, fws []*witnesstest.Witness, url string, db *postgres.Store, size uint64, cosigned []byte) {
	t.Helper()
	s, fws, url = pgWitnessServer(t, 2)
	size = appendN(t, s, 0, 5)
	cosigned = waitCosignatures(t, s, size, 2)
	db = openPG(t, url)
	waitKept(t, db, fws, size)
	return s, fws, url, db, size, cosigned
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
	s, fws, url, db, size, cp := cosignedOnPG(t)

	// A sequencer that starts now: its witnesses cannot be reached, and it
	// holds both cosignatures at once.
	next, err := newWitnesses(t.Context(), unreachable(s.cfg), s.l, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := s.l.Checkpoint()
	if got := next.Cosigned(t.Context(), latest, size); !bytes.Equal(got, cp) {
		t.Fatalf("a new sequencer serves\n%s\nwant\n%s", got, cp)
	}
	for _, w := range next.ws {
		if w.cosigned != size {
			t.Errorf("a new sequencer's witness %s starts from size %d, want %d", w.cfg.Name, w.cosigned, size)
		}
	}

	// A new sequencer with the real witnesses (the first one stopped):
	// after more appends each witness is sent the proof from the size it
	// cosigned, read from the database, and answers at once.
	s.stopWitnesses()
	before := witnesstest.Conflicts(fws)
	next = runWitnesses(t, s.cfg, s.l, db)
	size = appendN(t, s, 5, 3)
	waitUntil(t, "the new sequencer's cosignatures", func() bool { return next.complete(size) })
	if n := witnesstest.Conflicts(fws) - before; n != 0 {
		t.Errorf("the witnesses answered 409 %d times to a sequencer that read their sizes from the database", n)
	}
	waitKept(t, db, fws, size)

	// A third sequencer serves the cosignatures of the earlier
	// checkpoint too, read from the database when asked.
	third := mustWitnesses(t, unreachable(s.cfg), s.l, db)
	if got, n := third.Cosignatures(t.Context(), 5); n != 2 || !bytes.HasSuffix(cp, got) {
		t.Errorf("a new sequencer serves %d cosignatures for an earlier checkpoint:\n%s", n, got)
	}

	// A follower over its own view of the log serves the latest
	// checkpoint with both, read from the database.
	follower := followerWitnesses(t, s, url)
	fcp, fsize := follower.l.Checkpoint()
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

// runWitnesses makes cfg's witnesses over l and store, submitting until
// the test ends.
func runWitnesses(t *testing.T, cfg *Config, l *ledger.Ledger, store cosignatureStore) *witnesses {
	t.Helper()
	ws := mustWitnesses(t, cfg, l, store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ws.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ws
}

func mustWitnesses(t *testing.T, cfg *Config, l *ledger.Ledger, store cosignatureStore) *witnesses {
	t.Helper()
	ws, err := newWitnesses(t.Context(), cfg, l, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ws.backoffMin, ws.backoffMax, ws.interval = 20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	return ws
}

// followerWitnesses is a follower's witnesses over s's log on the
// database at url: its own store and ledger.Follow view, its witnesses
// unreachable.
func followerWitnesses(t *testing.T, s *testServer, url string) *witnesses {
	t.Helper()
	store := openPG(t, url)
	fl, err := ledger.Follow(t.Context(), store, s.key, ledger.Options{Logger: slog.New(slog.DiscardHandler), FollowInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	ws, err := newWitnesses(t.Context(), unreachable(s.cfg), fl, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ws.following = true
	return ws
}

// TestWitnessRestartConflict: a sequencer whose database holds no
// cosignature (they were lost, or never kept) sends "old 0"; the witnesses
// answer 409 with their sizes, and it catches up from there.
func TestWitnessRestartConflict(t *testing.T) {
	s, fws, url, db, size, _ := cosignedOnPG(t)
	conn := pgConn(t, url)
	if _, err := conn.Exec(t.Context(), "DELETE FROM cosignatures"); err != nil {
		t.Fatal(err)
	}
	s.stopWitnesses()
	before := witnesstest.Conflicts(fws)
	ws := runWitnesses(t, s.cfg, s.l, db)
	size = appendN(t, s, 5, 2)
	waitUntil(t, "the cosignatures after the conflicts", func() bool { return ws.complete(size) })
	if witnesstest.Conflicts(fws)-before < len(fws) {
		t.Errorf("%d answers 409 from %d witnesses to a sequencer that did not know their sizes", witnesstest.Conflicts(fws)-before, len(fws))
	}
}

// TestFollowerRefusesTamperedCosignature: a line in the database that
// does not verify with the witness's key (a byte flipped) is never served:
// not by a follower, nor by a new sequencer, which gathers it again.
func TestFollowerRefusesTamperedCosignature(t *testing.T) {
	s, _, url, db, size, _ := cosignedOnPG(t)
	lines, _ := db.Cosignatures(t.Context(), size)
	var id string
	for _, w := range s.srv.wit.ws {
		if w.cfg.Name == "w1" {
			id = w.key.ID()
		}
	}
	tampered := witnesstest.FlipSignatureByte(t, lines[id])
	conn := pgConn(t, url)
	if tag, err := conn.Exec(t.Context(), "UPDATE cosignatures SET line = $1 WHERE size = $2 AND witness = $3", tampered, int64(size), id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tampering with w1's row: %v %v", tag, err)
	}

	follower := followerWitnesses(t, s, url)
	cp, _ := follower.l.Checkpoint()
	got, n := follower.Cosignatures(t.Context(), size)
	if n != 1 || bytes.Contains(got, tampered) || !bytes.Contains(got, lines[fws0ID(s)]) {
		t.Errorf("a follower serves %d cosignatures with a tampered row:\n%s", n, follower.Cosigned(t.Context(), cp, size))
	}
	// The follow loop's read, again: still refused.
	if err := follower.read(t.Context(), size); err != nil {
		t.Fatal(err)
	}
	if got, n := follower.Cosignatures(t.Context(), size); n != 1 || bytes.Contains(got, tampered) {
		t.Errorf("after another read, a follower serves %d cosignatures with a tampered row:\n%s", n, got)
	}

	next := mustWitnesses(t, unreachable(s.cfg), s.l, db)
	if got, n := next.Cosignatures(t.Context(), size); n != 1 || bytes.Contains(got, tampered) {
		t.Errorf("a new sequencer serves %d cosignatures with a tampered row:\n%s", n, got)
	}
	for _, w := range next.ws {
		if w.cfg.Name == "w1" && w.cosigned != 0 {
			t.Errorf("a new sequencer takes w1's size %d from a line that does not verify", w.cosigned)
		}
	}
}

// fws0ID is the key ID of s's first witness.
func fws0ID(s *testServer) string { return s.srv.wit.ws[0].key.ID() }

// TestFollowerCatchesUpCosignatures: a follower that holds some of its
// latest checkpoint's cosignatures serves a witness's that reaches the
// database later, read by its loop.
func TestFollowerCatchesUpCosignatures(t *testing.T) {
	s, _, url, db, size, _ := cosignedOnPG(t)
	lines, _ := db.Cosignatures(t.Context(), size)
	id := s.srv.wit.ws[1].key.ID()
	conn := pgConn(t, url)
	// w1's cosignature is not in the database yet.
	if _, err := conn.Exec(t.Context(), "DELETE FROM cosignatures WHERE witness = $1", id); err != nil {
		t.Fatal(err)
	}
	follower := followerWitnesses(t, s, url)
	if _, n := follower.Cosignatures(t.Context(), size); n != 1 {
		t.Fatalf("the follower serves %d cosignatures, want w0's", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); follower.follow(ctx, func() bool { return false }) }()
	defer func() { cancel(); <-done }()
	if _, err := conn.Exec(t.Context(), "INSERT INTO cosignatures (size, witness, line) VALUES ($1, $2, $3)", int64(size), id, lines[id]); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the follower to serve w1's cosignature", func() bool {
		_, n := follower.Cosignatures(t.Context(), size)
		return n == 2
	})
}
