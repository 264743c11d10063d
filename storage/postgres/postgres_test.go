package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
	"github.com/decisionledger/ledger/storage/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// A cleanup, not a defer: it runs after the cleanups registered later
	// (such as hold's release), so a failing test never waits forever
	// for a connection a held transaction keeps.
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	srv := pgtest.Shared(t)
	storetest.Run(t, func(t *testing.T) (ledger.Store, func() ledger.Store) {
		url := srv.NewDatabase(t)
		s := open(t, url)
		return s, func() ledger.Store {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = open(t, url)
			return s
		}
	})
}

// batch returns the batch of n entries at start; the tiles are not the
// tree's (this file checks storage, not Merkle hashing).
func batch(start uint64, n int, keys ...string) ledger.Batch {
	b := ledger.Batch{Start: start}
	for i := range n {
		e := fmt.Appendf(nil, `{"index":%d,"pad":%q}`, start+uint64(i), strings.Repeat("x", 600))
		b.Entries = append(b.Entries, e)
		b.LeafHashes = append(b.LeafHashes, sha256.Sum256(append([]byte{0}, e...)))
	}
	for _, k := range keys {
		b.Keys = append(b.Keys, []byte(k))
	}
	b.Tiles = []ledger.Tile{{Level: 0, Index: start / ledger.TileWidth, Hashes: bytes.Repeat([]byte{byte(start)}, ledger.HashSize)}}
	return b
}

func query[T any](t *testing.T, url, sql string) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(t.Context(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestMigrationsAtReopen: the first open applies every migration, each
// recorded once; later opens apply nothing and keep the data.
func TestMigrationsAtReopen(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	if err := s.Commit(t.Context(), batch(0, 3)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	first := query[time.Time](t, url, "SELECT max(applied_at) FROM schema_migrations")
	for range 3 {
		s := open(t, url)
		st, err := s.State(t.Context())
		if err != nil || st.Size != 3 {
			t.Errorf("State after reopen = %+v, %v; want size 3", st, err)
		}
		s.Close()
	}
	latest := postgres.LatestVersion(t)
	if n := query[int64](t, url, "SELECT count(*) FROM schema_migrations"); n != int64(latest) {
		t.Errorf("schema_migrations has %d rows after four opens, want %d (versions 1 to %[2]d)", n, latest)
	}
	if v := query[int32](t, url, "SELECT max(version) FROM schema_migrations"); v != int32(latest) {
		t.Errorf("schema version %d, want %d", v, latest)
	}
	if last := query[time.Time](t, url, "SELECT max(applied_at) FROM schema_migrations"); !last.Equal(first) {
		t.Errorf("a reopen applied a migration again: applied_at %v, then %v", first, last)
	}
}

// TestConcurrentOpens: opens racing on a new database migrate it once.
func TestConcurrentOpens(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(t.Context(), url, postgres.Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	if n, latest := query[int64](t, url, "SELECT count(*) FROM schema_migrations"), postgres.LatestVersion(t); n != int64(latest) {
		t.Errorf("schema_migrations has %d rows, want %d", n, latest)
	}
}

// TestFutureSchemaRefused: a database a newer build migrated is refused
// with a SchemaVersionError, and left as it was.
func TestFutureSchemaRefused(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	open(t, url).Close()
	latest := postgres.LatestVersion(t)
	exec(t, url, fmt.Sprintf("INSERT INTO schema_migrations (version, name) VALUES (%d, 'future'), (%d, 'future_too')", latest+1, latest+2))
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err == nil {
		s.Close()
		t.Fatalf("Open of a schema at version %d succeeded", latest+2)
	}
	var sv *postgres.SchemaVersionError
	if !errors.As(err, &sv) || sv.Found != latest+2 || sv.Known != latest {
		t.Fatalf("Open of a schema at version %d: %v; want a SchemaVersionError{%[1]d, %d}", latest+2, err, latest)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("version %d", latest+2)) || !strings.Contains(err.Error(), fmt.Sprintf("up to %d", latest)) {
		t.Errorf("error does not name both versions: %v", err)
	}
	if n := query[int64](t, url, "SELECT count(*) FROM schema_migrations"); n != int64(latest+2) {
		t.Errorf("schema_migrations has %d rows after the refusal, want the %d it had", n, latest+2)
	}
}

// TestDurabilitySettings: every connection of the pool has
// synchronous_commit on, although the test server's default is off and
// the URL asks for off too.
func TestDurabilitySettings(t *testing.T) {
	srv := pgtest.Shared(t)
	url := srv.NewDatabase(t)
	if got := query[string](t, url, "SHOW synchronous_commit"); got != "off" {
		t.Fatalf("the test server's default synchronous_commit is %s; the test needs off to mean anything", got)
	}
	s, err := postgres.Open(t.Context(), url+"&synchronous_commit=off", postgres.Options{MaxConns: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Closing waits for the connections AcquireAll holds until its own
	// cleanups, which run first.
	t.Cleanup(func() { s.Close() })
	conns := postgres.AcquireAll(t, s)
	if len(conns) != 5 {
		t.Fatalf("acquired %d connections, want 5", len(conns))
	}
	for i, c := range conns {
		var v string
		if err := c.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("connection %d: synchronous_commit = %s, want on", i, v)
		}
		if err := c.QueryRow(t.Context(), "SHOW fsync").Scan(&v); err != nil || v != "on" {
			t.Errorf("connection %d: fsync = %s, %v", i, v, err)
		}
	}
}

// TestDuplicateKeyMidBatch: a batch whose third entry repeats a stored key
// fails inside its transaction, after the tree size was moved and two
// entries written; nothing of it is visible, and the next batch is taken.
func TestDuplicateKeyMidBatch(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	defer s.Close()
	if err := s.Commit(ctx, batch(0, 2, "k0", "k1")); err != nil {
		t.Fatal(err)
	}
	bad := batch(2, 4, "k2", "", "k1", "k5")
	err := s.Commit(ctx, bad)
	if !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Commit with a stored key: %v, want ErrConflict", err)
	}
	if strings.Contains(err.Error(), "k1") {
		t.Errorf("the error repeats the key: %v", err)
	}
	checkNothingOf(t, s, bad, 2)
	// The next batch at the same start is taken.
	good := batch(2, 4, "k2", "", "k4", "k5")
	if err := s.Commit(ctx, good); err != nil {
		t.Fatalf("Commit after the refused batch: %v", err)
	}
	if i, err := s.IndexOfKey(ctx, []byte("k4")); err != nil || i != 4 {
		t.Errorf("IndexOfKey(k4) = %d, %v", i, err)
	}
}

// checkNothingOf checks that nothing of the refused batch b is visible and
// the store is at size.
func checkNothingOf(t *testing.T, s *postgres.Store, b ledger.Batch, size uint64) {
	t.Helper()
	ctx := t.Context()
	st, err := s.State(ctx)
	if err != nil || st.Size != size {
		t.Errorf("State after the failed batch = %+v, %v; want size %d", st, err, size)
	}
	for i, lh := range b.LeafHashes {
		if _, err := s.IndexOf(ctx, lh); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("IndexOf(leaf %d of the failed batch): %v, want ErrNotFound", i, err)
		}
		if _, err := s.Entry(ctx, b.Start+uint64(i)); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Entry(%d) of the failed batch: %v, want ErrNotFound", b.Start+uint64(i), err)
		}
	}
	for _, k := range b.Keys {
		if len(k) == 0 {
			continue
		}
		if i, err := s.IndexOfKey(ctx, k); err == nil && i >= size {
			t.Errorf("IndexOfKey(%q) = %d: a key of the failed batch is stored", k, i)
		}
	}
	if tl, err := s.Tile(ctx, 0, b.Start/ledger.TileWidth); err == nil && bytes.Equal(tl, b.Tiles[0].Hashes) {
		t.Errorf("the failed batch's tile is stored")
	}
}

// TestCancelDuringCommit cancels Commit's context at many moments while
// it runs (from before it starts to after it returns): each either
// commits the whole batch or leaves nothing, and the store takes the next
// batch every time.
func TestCancelDuringCommit(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	defer s.Close()
	size := uint64(0)
	cancelled := 0
	for i := range 40 {
		b := batch(size, 300, "")
		b.Keys = nil
		ctx, cancel := context.WithCancel(t.Context())
		delay := time.Duration(i) * 250 * time.Microsecond
		timer := time.AfterFunc(delay, cancel)
		err := s.Commit(ctx, b)
		timer.Stop()
		cancel()
		if err != nil {
			if errors.Is(err, postgres.ErrBroken) {
				t.Fatalf("cancel after %v broke the store: %v", delay, err)
			}
			cancelled++
			checkNothingOf(t, s, b, size)
		} else {
			size += 300
		}
		// The store takes the next batch.
		nb := batch(size, 2)
		if err := s.Commit(t.Context(), nb); err != nil {
			t.Fatalf("Commit after a cancel at %v: %v", delay, err)
		}
		size += 2
	}
	if cancelled == 0 {
		t.Errorf("no Commit was cancelled; the test shows nothing")
	}
	t.Logf("%d of 40 commits cancelled, the rest committed", cancelled)
	st, err := s.State(t.Context())
	if err != nil || st.Size != size {
		t.Fatalf("State = %+v, %v; want size %d", st, err, size)
	}
	err = s.ReadEntries(t.Context(), 0, size, func(i uint64, e []byte) error {
		if !bytes.Contains(e, fmt.Appendf(nil, `{"index":%d,`, i)) {
			return fmt.Errorf("entry %d is %.30q", i, e)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestBrokenConnectionDuringCommit: the server ends the connection of a
// Commit waiting for the tree_head lock (held here by another session):
// the batch fails and leaves nothing, and the store takes the next one.
func TestBrokenConnectionDuringCommit(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	defer s.Close()
	if err := s.Commit(ctx, batch(0, 5)); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT size FROM tree_head FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	b := batch(5, 10)
	go func() { done <- s.Commit(ctx, b) }()
	// Wait for the Commit to block on the lock, then end its backend.
	pid := waitForLockWait(t, url, "BEGIN;%EXECUTE ledger_move%")
	exec(t, url, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("Commit succeeded although its connection was terminated")
	} else {
		t.Logf("Commit with its connection terminated: %v", err)
	}
	checkNothingOf(t, s, b, 5)
	if err := s.Commit(ctx, batch(5, 10)); err != nil {
		t.Fatalf("Commit after the failed one: %v", err)
	}
}

// waitForLockWait waits until a backend of url's database whose query is
// LIKE pattern waits for a lock, and returns its process id.
func waitForLockWait(t *testing.T, url, pattern string) int32 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Each statement is its own transaction here: pg_stat_activity
		// is a snapshot for the rest of a transaction once read.
		var pids []int32
		err := conn.QueryRow(t.Context(), `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, pattern).Scan(&pids)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) > 0 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement like %q waited for a lock", pattern)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestErrorsRedactPassword: errors from Open never show the URL's
// password, whatever the form of the URL.
func TestErrorsRedactPassword(t *testing.T) {
	for _, u := range []string{
		"postgres://ledger:hunter2secret@/ledger?host=/nonexistent-socket-dir&connect_timeout=2",
		"postgres://ledger@/ledger?host=/nonexistent-socket-dir&password=hunter2secret&connect_timeout=2",
		"host=/nonexistent-socket-dir user=ledger password=hunter2secret dbname=ledger connect_timeout=2",
		"host=/nonexistent-socket-dir user=ledger password='hunter2secret' dbname=ledger connect_timeout=2",
		"postgres://ledger:hunter2secret@/ledger?host=/nonexistent&sslmode=bogus",
		"postgres://ledger:hunter2secret@[::1/ledger",
	} {
		s, err := postgres.Open(t.Context(), u, postgres.Options{})
		if err == nil {
			s.Close()
			t.Errorf("Open(%s) succeeded", postgres.RedactURL(u))
			continue
		}
		if strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("error shows the password: %v", err)
		}
		if r := postgres.RedactURL(u); strings.Contains(r, "hunter2secret") {
			t.Errorf("RedactURL(%q) = %q", u, r)
		}
	}
}

// TestClosed: a closed store refuses everything with ErrClosed.
func TestClosed(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.State(t.Context()); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("State after Close: %v", err)
	}
	if err := s.Commit(t.Context(), batch(0, 1)); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("Commit after Close: %v", err)
	}
}

// TestCommitEntryBytes: entries and keys of any bytes are stored as
// given, whichever way Commit writes them (as text: JSON with quotes,
// backslashes and non-ASCII letters, an empty entry; in hex: invalid
// UTF-8, U+0000, U+001F), on a new connection (the statements prepared
// in the commit's message) and a used one.
func TestCommitEntryBytes(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batches := [][][]byte{
		{[]byte(`{"principal":"o'brien@example.com","memo":"a \"quoted\" \\ backslash"}`), {}, []byte(`{"name":"Zoë ÅÆ 日本"}`), []byte(`''`)},
		{[]byte("\xff\xfe not UTF-8"), []byte("a\x00b"), []byte("a\x1fb"), {}, []byte(`{"ok":true}`)},
	}
	keys := [][]byte{[]byte("k,1"), nil, []byte("k'2\x00"), []byte("\xff")}
	var want [][]byte
	size := uint64(0)
	for _, entries := range batches {
		b := ledger.Batch{Start: size, Entries: entries}
		for i, e := range entries {
			b.LeafHashes = append(b.LeafHashes, sha256.Sum256(append([]byte{0}, e...)))
			b.Keys = append(b.Keys, append(bytes.Clone(keys[i%len(keys)]), byte('a'+size), byte('a'+i)))
		}
		b.Keys[1] = nil
		b.Tiles = []ledger.Tile{{Level: 0, Index: 0, Hashes: bytes.Repeat([]byte{byte(size)}, 2*ledger.HashSize)}}
		if err := s.Commit(ctx, b); err != nil {
			t.Fatalf("Commit at %d: %v", size, err)
		}
		for i, k := range b.Keys {
			if len(k) == 0 {
				continue
			}
			if got, err := s.IndexOfKey(ctx, k); err != nil || got != size+uint64(i) {
				t.Errorf("IndexOfKey(key of entry %d) = %d, %v", size+uint64(i), got, err)
			}
		}
		if got, err := s.Tile(ctx, 0, 0); err != nil || !bytes.Equal(got, b.Tiles[0].Hashes) {
			t.Errorf("tile 0/0 after the batch at %d = %x, %v", size, got, err)
		}
		want = append(want, entries...)
		size += uint64(len(entries))
	}
	err = s.ReadEntries(ctx, 0, size, func(i uint64, e []byte) error {
		if !bytes.Equal(e, want[i]) {
			return fmt.Errorf("entry %d = %q, want %q", i, e, want[i])
		}
		if j, err := s.IndexOf(ctx, sha256.Sum256(append([]byte{0}, want[i]...))); err != nil || j > i {
			return fmt.Errorf("IndexOf(leaf %d) = %d, %v", i, j, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
