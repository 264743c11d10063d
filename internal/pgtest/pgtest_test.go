package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// A server that Shutdown stopped refuses connections, and after Restart
// serves the same URL with every committed row, after a fast shutdown
// and after an immediate one (which the server's log shows it recovered
// from).
func TestShutdownRestart(t *testing.T) {
	s := NewServer(t)
	ctx := t.Context()
	url := s.URL("postgres")
	exec := func(sql string, args ...any) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec("CREATE TABLE rows (n int)")
	for i, mode := range []ShutdownMode{Fast, Immediate} {
		exec("SET synchronous_commit = on; INSERT INTO rows VALUES (1)")
		if err := s.Shutdown(mode); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(mode); err == nil {
			t.Error("a second Shutdown did not fail")
		}
		if conn, err := pgx.Connect(ctx, url); err == nil {
			conn.Close(ctx)
			t.Fatalf("mode %d: connected to a server that was shut down", mode)
		}
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart(); err == nil {
			t.Error("Restart of a running server did not fail")
		}
		if n := count(); n != i+1 {
			t.Fatalf("mode %d: %d rows after the restart, want %d", mode, n, i+1)
		}
		// Only the immediate shutdown leaves the server to recover.
		log, err := os.ReadFile(filepath.Join(s.root, "postgres.log"))
		if err != nil {
			t.Fatal(err)
		}
		if recovered := strings.Count(string(log), "automatic recovery in progress"); recovered != i {
			t.Errorf("mode %d: %d recoveries in the server's log, want %d:\n%s", mode, recovered, i, log)
		}
	}
}

// A database of NewDatabase is dropped once its test has ended, and Stop
// (here: what it waits for) names one that could not be, with its test.
func TestNewDatabaseDropped(t *testing.T) {
	s := Shared(t)
	ctx := t.Context()
	exists := func(name string) bool {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	var kept, gone string
	t.Run("kept", func(t *testing.T) {
		kept = strings.TrimPrefix(strings.SplitN(s.NewDatabase(t), "?", 2)[0], "postgres://"+s.User+"@/")
		if !exists(kept) {
			t.Fatalf("NewDatabase returned %s, which does not exist", kept)
		}
	})
	t.Run("gone", func(t *testing.T) {
		gone = strings.TrimPrefix(strings.SplitN(s.NewDatabase(t), "?", 2)[0], "postgres://"+s.User+"@/")
		if err := s.Exec(ctx, "DROP DATABASE "+gone); err != nil { // under the cleanup's feet
			t.Fatal(err)
		}
	})
	s.drops.Wait()
	s.dropMu.Lock()
	errs := s.dropErrs
	s.dropErrs = nil
	s.dropMu.Unlock()
	if exists(kept) {
		t.Errorf("database %s is left after its test", kept)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "database "+gone+" of TestNewDatabaseDropped/gone") {
		t.Errorf("the failed drops: %v; want the one of %s, named", errs, gone)
	}
}
