package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// line is a stand-in cosignature line (the store does not verify lines).
func line(witness string, size uint64) []byte {
	return fmt.Appendf(nil, "— %s %d\n", witness, size)
}

// signedAt stores a checkpoint for each size (of a tree at least that
// large); the bytes are stand-ins too.
func signedAt(t *testing.T, s *postgres.Store, sizes ...uint64) {
	t.Helper()
	for _, size := range sizes {
		if err := s.AddCheckpoint(t.Context(), size, fmt.Appendf(nil, "checkpoint %d\n", size)); err != nil {
			t.Fatalf("AddCheckpoint(%d): %v", size, err)
		}
	}
}

// TestCosignaturesFenced: once another store took the lease, a former
// holder's PutCosignature is refused with ErrFenced and writes nothing.
func TestCosignaturesFenced(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	commit(t, a, batch(0, 4))
	signedAt(t, a, 2, 4)
	if err := a.PutCosignature(ctx, 2, "w+00000001", line("w", 2)); err != nil {
		t.Fatalf("the holder's PutCosignature: %v", err)
	}
	expireLease(t, url)
	acquire(t, b, "b")
	wantFenced(t, "PutCosignature of a fenced store", a.PutCosignature(ctx, 4, "w+00000001", line("w", 4)))
	if lines, err := b.Cosignatures(ctx, 4); err != nil || len(lines) != 0 {
		t.Errorf("Cosignatures(4) after the fenced write = %q, %v; want none", lines, err)
	}
	if latest, err := b.LatestCosignatures(ctx); err != nil || latest["w+00000001"] != 2 {
		t.Errorf("LatestCosignatures after the fenced write = %v, %v; want w at 2", latest, err)
	}
	if err := b.PutCosignature(ctx, 4, "w+00000001", line("w", 4)); err != nil {
		t.Fatalf("the new holder's PutCosignature: %v", err)
	}
}

// TestCosignaturesRefused: malformed input and a size without a
// checkpoint are refused, naming what, and write nothing.
func TestCosignaturesRefused(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	commit(t, s, batch(0, 3))
	signedAt(t, s, 3)
	for _, tc := range []struct {
		size    uint64
		witness string
		line    []byte
		want    string
	}{
		{3, "", line("w", 3), "key ID is empty"},
		{3, strings.Repeat("w", 513), line("w", 3), "longer than 512"},
		{3, "w+00000001", nil, "line is empty"},
		{3, "w+00000001", make([]byte, 4097), "longer than 4096"},
		{1 << 63, "w+00000001", line("w", 3), "beyond the largest"},
		{2, "w+00000001", line("w", 2), "no checkpoint is stored"},
	} {
		err := s.PutCosignature(ctx, tc.size, tc.witness, tc.line)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PutCosignature(%d, %.20q, %.20q) = %v, want %q", tc.size, tc.witness, tc.line, err, tc.want)
		}
	}
	if err := s.PutCosignature(ctx, 2, "w+00000001", line("w", 2)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("PutCosignature for a size without a checkpoint: %v, want ErrNotFound", err)
	}
	if n := query[int64](t, url, "SELECT count(*) FROM cosignatures"); n != 0 {
		t.Errorf("%d rows after refused puts", n)
	}
}

// TestCosignaturesBounded: the rows of the CosignatureSizesKept latest
// sizes are kept, and each witness's latest beyond them; nothing else.
// The bound is lowered to 16 for the test (1,034 sizes cosigned took 5 s
// of commits); that a store keeps CosignatureSizesKept is checked apart.
func TestCosignaturesBounded(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	if got := postgres.CosignaturesKept(s); got != postgres.CosignatureSizesKept {
		t.Fatalf("a store keeps the cosignatures of %d sizes, want CosignatureSizesKept (%d)", got, postgres.CosignatureSizesKept)
	}
	const kept = 16
	postgres.SetCosignaturesKept(s, kept)
	const sizes = kept + 10
	commit(t, s, batch(0, sizes))
	for size := uint64(1); size <= sizes; size++ {
		signedAt(t, s, size)
	}
	// w1 cosigns every size; w2 sizes 1 and 2 only, w3 every tenth.
	for size := uint64(1); size <= sizes; size++ {
		puts := []string{"w1+00000001"}
		if size <= 2 {
			puts = append(puts, "w2+00000002")
		}
		if size%10 == 0 {
			puts = append(puts, "w3+00000003")
		}
		for _, w := range puts {
			if err := s.PutCosignature(ctx, size, w, line(w, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldest := uint64(sizes - kept + 1)
	if n := query[int64](t, url, "SELECT count(DISTINCT size) FROM cosignatures WHERE witness = 'w1+00000001'"); n != kept {
		t.Errorf("w1's rows cover %d sizes, want %d", n, kept)
	}
	if m := query[int64](t, url, "SELECT min(size) FROM cosignatures WHERE witness = 'w1+00000001'"); uint64(m) != oldest {
		t.Errorf("w1's oldest row is of size %d, want %d", m, oldest)
	}
	// w2's latest (size 2) is kept beyond the bound, its older row not.
	lines, err := s.Cosignatures(ctx, 2)
	if err != nil || string(lines["w2+00000002"]) != string(line("w2+00000002", 2)) || lines["w1+00000001"] != nil {
		t.Errorf("Cosignatures(2) = %q, %v; want w2's line only", lines, err)
	}
	if lines, _ := s.Cosignatures(ctx, 1); len(lines) != 0 {
		t.Errorf("Cosignatures(1) = %q; want none", lines)
	}
	if n := query[int64](t, url, fmt.Sprintf("SELECT count(*) FROM cosignatures WHERE witness = 'w3+00000003' AND size < %d", oldest)); n != 0 {
		t.Errorf("%d rows of w3 older than the bound, although it cosigned later", n)
	}
	latest, err := s.LatestCosignatures(ctx)
	want := map[string]uint64{"w1+00000001": sizes, "w2+00000002": 2, "w3+00000003": sizes - sizes%10}
	if err != nil || len(latest) != 3 || latest["w1+00000001"] != want["w1+00000001"] ||
		latest["w2+00000002"] != 2 || latest["w3+00000003"] != want["w3+00000003"] {
		t.Errorf("LatestCosignatures = %v, %v; want %v", latest, err, want)
	}
}
