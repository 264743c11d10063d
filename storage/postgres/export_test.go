package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// AcquireAll holds every connection the store's pool may open, at once,
// until the test ends, so that a test can look at each.
func AcquireAll(t *testing.T, s *Store) []*pgx.Conn {
	t.Helper()
	var conns []*pgx.Conn
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		conns = append(conns, c.Conn())
	}
	return conns
}

// SetHook makes s call hook at the points where a transaction holds
// tree_head's row lock: "commit" (after Commit's conditional UPDATE),
// "checkpoint" (after AddCheckpoint's epoch check), "snapshot" (after
// PutSnapshot's), "acquire" (after AcquireLease's updates, before its
// COMMIT).
func SetHook(s *Store, hook func(point string)) { s.hook = hook }

// CosignaturesKept is s's bound on the cosigned sizes kept; SetCosignaturesKept
// sets it, so that a test of the bound need not cosign over a thousand
// sizes.
func CosignaturesKept(s *Store) int          { return s.cosignaturesKept }
func SetCosignaturesKept(s *Store, kept int) { s.cosignaturesKept = kept }

// LatestVersion is the schema version this build migrates to.
func LatestVersion(t *testing.T) int {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}
