package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// fixture is a log of n entries built by the real ledger, with a
// checkpoint over all of them.
type fixture struct {
	key        *verify.Key
	otherKey   *verify.Key
	l          *ledger.Ledger
	entries    [][]byte
	checkpoint []byte
	cp         *tlog.Checkpoint
	signWith   *ledger.Key
}

func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	ctx := context.Background()
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/verify")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ctx, memory.New(), lk, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := commit.Params([]byte(fmt.Sprintf(`{"to":"user%d@example.com","amount_minor":%d}`, i, i)))
			_, errs[i] = l.Append(ctx, ledger.Record{
				Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment",
				Decision: entry.Allow, Policies: []string{"payments.limit"},
				Params: c, Tiers: sha256.Sum256([]byte("tiers")),
				Attributes: []byte(fmt.Sprintf(`{"amount_minor":%d,"payee_known":true}`, i)),
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	signed, err := l.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{l: l, checkpoint: signed, signWith: lk}
	if f.key, err = verify.ParseKey(vkey); err != nil {
		t.Fatal(err)
	}
	_, otherV, _ := ledger.GenerateKey("ledger.example.com/verify")
	if f.otherKey, err = verify.ParseKey(otherV); err != nil {
		t.Fatal(err)
	}
	if f.cp, err = f.key.Checkpoint(signed); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(n) {
		b, err := l.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		f.entries = append(f.entries, b)
	}
	return f
}

// verifyRange runs a whole range check over entries (which may have been
// tampered with) and returns the error.
func (f *fixture) verifyRange(t *testing.T, start, end uint64, entries [][]byte, left, right [][]byte, prev *commit.Digest) error {
	t.Helper()
	r, err := verify.NewRange(f.key, f.cp, start, end, prev, false)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := r.Add(e); err != nil {
			return err
		}
	}
	return r.Finish(left, right)
}

func (f *fixture) proof(t *testing.T, start, end uint64) (left, right [][]byte) {
	t.Helper()
	left, right, err := f.l.RangeProof(context.Background(), start, end, f.cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	return left, right
}

func TestRangeVerifies(t *testing.T) {
	f := newFixture(t, 700)
	for _, r := range [][2]uint64{{0, 700}, {0, 1}, {256, 512}, {300, 301}, {699, 700}, {5, 5}, {0, 0}} {
		left, right := f.proof(t, r[0], r[1])
		// The proof matches one computed from the leaves themselves.
		wantLeft, wantRight := leafProof(f.entries, r[0], r[1])
		if !equalHashes(left, wantLeft) || !equalHashes(right, wantRight) {
			t.Fatalf("range %v: ledger's proof differs from the leaves'", r)
		}
		if err := f.verifyRange(t, r[0], r[1], f.entries[r[0]:r[1]], left, right, nil); err != nil {
			t.Errorf("range %v: %v", r, err)
		}
	}
}

func leafProof(entries [][]byte, start, end uint64) (left, right [][]byte) {
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	l := rf.NewEmptyRange(0)
	for _, e := range entries[:start] {
		l.Append(rfc6962.DefaultHasher.HashLeaf(e), nil)
	}
	r := rf.NewEmptyRange(end)
	for _, e := range entries[end:] {
		r.Append(rfc6962.DefaultHasher.HashLeaf(e), nil)
	}
	return l.Hashes(), r.Hashes()
}

func equalHashes(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Every kind of tampering is refused, naming the entry and the check.
func TestRangeRefusesTampering(t *testing.T) {
	f := newFixture(t, 300)
	const start, end = 100, 200
	left, right := f.proof(t, start, end)
	clone := func() [][]byte {
		c := make([][]byte, end-start)
		for i := range c {
			c[i] = bytes.Clone(f.entries[start+i])
		}
		return c
	}
	replace := func(old, new string) func([][]byte) [][]byte {
		return func(es [][]byte) [][]byte {
			es[17] = []byte(strings.Replace(string(es[17]), old, new, 1))
			return es
		}
	}
	flipIn := func(member string) func([][]byte) [][]byte {
		return func(es [][]byte) [][]byte {
			i := bytes.Index(es[17], []byte(`"`+member+`":`))
			if i < 0 {
				t.Fatalf("no member %s", member)
			}
			// Flip a byte inside the value, keeping it valid JSON text:
			// change a digit or a letter to another of the same class.
			from := i + len(member) + 3
			hexOnly := bytes.HasPrefix(es[17][from:], []byte(`"sha256:`))
			if hexOnly {
				from += len(`"sha256:`)
			}
			for j := from; j < len(es[17]); j++ {
				c := es[17][j]
				switch {
				case c >= '1' && c <= '8', !hexOnly && (c >= 'b' && c <= 'y' || c >= 'B' && c <= 'Y'):
					es[17][j] = c + 1
					return es
				}
			}
			t.Fatalf("nothing to flip in %s", member)
			return es
		}
	}
	cases := []struct {
		name   string
		mutate func([][]byte) [][]byte
		index  int64
		check  verify.Check
	}{
		{"flip-attributes", flipIn("attributes"), 117, verify.CheckEntrySignature},
		{"flip-decision", replace(`"decision":"allow"`, `"decision":"deny"`), 117, verify.CheckEntrySignature},
		{"flip-policies", flipIn("policies"), 117, verify.CheckEntrySignature},
		{"flip-params-digest", flipIn("params_digest"), 117, verify.CheckEntrySignature},
		{"flip-time", flipIn("time"), 117, verify.CheckEntrySignature},
		{"flip-prev", flipIn("prev"), 117, verify.CheckEntrySignature},
		{"flip-signature", flipIn("sig"), 117, verify.CheckEntrySignature},
		{"flip-key-id", flipIn("key_id"), 117, verify.CheckEntryKey},
		{"non-canonical", replace(`"index":`, `"index": `), 117, verify.CheckEntryEncoding},
		{"drop", func(es [][]byte) [][]byte { return append(es[:17:17], es[18:]...) }, 117, verify.CheckIndex},
		{"duplicate", func(es [][]byte) [][]byte {
			return append(append(es[:18:18], es[17]), es[18:]...)
		}, 118, verify.CheckIndex},
		{"reorder", func(es [][]byte) [][]byte { es[17], es[18] = es[18], es[17]; return es }, 117, verify.CheckIndex},
		{"insert-foreign", func(es [][]byte) [][]byte {
			return append(append(es[:17:17], f.entries[5]), es[17:]...)
		}, 117, verify.CheckIndex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := f.verifyRange(t, start, end, c.mutate(clone()), left, right, nil)
			var fail *verify.Failure
			if !errors.As(err, &fail) || fail.Index != c.index || fail.Check != c.check {
				t.Fatalf("got %v, want entry %d: %s", err, c.index, c.check)
			}
		})
	}
	t.Run("changed-range-proof-hash", func(t *testing.T) {
		bad := [][]byte{bytes.Clone(left[0])}
		bad = append(bad, left[1:]...)
		bad[0][3] ^= 1
		err := f.verifyRange(t, start, end, clone(), bad, right, nil)
		var fail *verify.Failure
		if !errors.As(err, &fail) || fail.Check != verify.CheckRange || fail.Index != verify.NoIndex {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		err := f.verifyRange(t, start, end, clone()[:50], left, right, nil)
		var fail *verify.Failure
		if !errors.As(err, &fail) || fail.Check != verify.CheckIndex || fail.Index != 150 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("wrong-prev-link", func(t *testing.T) {
		var wrong commit.Digest
		wrong[0] = 1
		err := f.verifyRange(t, start, end, clone(), left, right, &wrong)
		var fail *verify.Failure
		if !errors.As(err, &fail) || fail.Check != verify.CheckPrev || fail.Index != start {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("resigned-by-other-key", func(t *testing.T) {
		skey, _, _ := ledger.GenerateKey("ledger.example.com/verify")
		other, _ := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
		es := clone()
		e, err := entry.Parse(es[17])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Sign(other.ID(), other.Sign); err != nil {
			t.Fatal(err)
		}
		es[17], _ = e.Marshal()
		err = f.verifyRange(t, start, end, es, left, right, nil)
		var fail *verify.Failure
		if !errors.As(err, &fail) || fail.Check != verify.CheckEntryKey || fail.Index != 117 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("all-failures", func(t *testing.T) {
		es := clone()
		es[3] = []byte(strings.Replace(string(es[3]), `"decision":"allow"`, `"decision":"deny"`, 1))
		es[40] = []byte(strings.Replace(string(es[40]), `"decision":"allow"`, `"decision":"deny"`, 1))
		r, _ := verify.NewRange(f.key, f.cp, start, end, nil, true)
		for _, e := range es {
			if err := r.Add(e); err != nil {
				t.Fatal(err)
			}
		}
		err := r.Finish(left, right)
		msg := fmt.Sprint(err)
		if !strings.Contains(msg, "entry 103: signature") || !strings.Contains(msg, "entry 140: signature") || !strings.Contains(msg, "range: range-proof") {
			t.Fatalf("got %v", err)
		}
	})
	if err := f.verifyRange(t, start, end, clone(), left, right, nil); err != nil {
		t.Fatalf("untampered range: %v", err)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	f := newFixture(t, 10)
	// Under another key, the error names the key that did sign.
	var us *verify.UnknownSignerError
	_, err := f.otherKey.Checkpoint(f.checkpoint)
	if !isCheck(err, verify.CheckCheckpointSignature) || !errors.As(err, &us) ||
		!slices.Equal(us.Signers, []string{f.signWith.ID()}) || us.Trusted == f.signWith.ID() ||
		!strings.HasPrefix(us.Trusted, "ledger.example.com/verify+") {
		t.Errorf("checkpoint under an untrusted key: %v", err)
	}
	forged := bytes.Replace(f.checkpoint, []byte("\n10\n"), []byte("\n11\n"), 1)
	if _, err := f.key.Checkpoint(forged); err == nil {
		t.Error("forged checkpoint accepted")
	}
	foreign := bytes.Replace(f.checkpoint, []byte("ledger.example.com/verify\n"), []byte("ledger.example.org/other\n"), 1)
	if _, err := f.key.Checkpoint(foreign); err == nil {
		t.Error("foreign-origin checkpoint accepted")
	}
}

func TestConsistency(t *testing.T) {
	f := newFixture(t, 50)
	ctx := context.Background()
	// An earlier checkpoint, then more entries and a later one.
	early, err := f.l.CheckpointAt(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	older, _ := f.key.Checkpoint(early)
	g := newFixture(t, 80) // another log with the same origin: a fork
	p, err := g.l.ConsistencyProof(ctx, 50, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Consistency(g.cp, g.cp, nil); err != nil {
		t.Errorf("same checkpoint: %v", err)
	}
	gEarly, _ := g.l.CheckpointAt(ctx, 80)
	gcp, _ := g.key.Checkpoint(gEarly)
	if err := verify.Consistency(older, gcp, p); err == nil {
		t.Error("consistency accepted across a forked history")
	}
	var fail *verify.Failure
	if err := verify.Consistency(gcp, older, p); !errors.As(err, &fail) || fail.Check != verify.CheckConsistency {
		t.Errorf("newer before older: %v", err)
	}
}

func TestParams(t *testing.T) {
	f := newFixture(t, 3)
	e, err := entry.Parse(f.entries[0])
	if err != nil {
		t.Fatal(err)
	}
	var to, amount string
	for i := range 3 {
		if e.Params.Equal(mustParams(t, fmt.Sprintf(`{"to":"user%d@example.com","amount_minor":%d}`, i, i))) {
			to, amount = fmt.Sprintf("user%d@example.com", i), fmt.Sprint(i)
		}
	}
	cases := map[string]struct {
		candidate string
		want      verify.ParamsResult
	}{
		"same":          {`{"amount_minor":` + amount + `, "to":"` + to + `"}`, verify.Match},
		"changed-value": {`{"amount_minor":` + amount + `, "to":"other@example.com"}`, verify.Mismatch},
		"added-key":     {`{"amount_minor":` + amount + `, "to":"` + to + `","cc":null}`, verify.Mismatch},
		"refused":       {`{"amount_minor":1.5}`, verify.Refused},
	}
	for name, c := range cases {
		got, err := verify.Params(e, []byte(c.candidate))
		if got != c.want {
			t.Errorf("%s: %s (%v), want %s", name, got, err, c.want)
		}
		if c.want == verify.Refused && !errors.Is(err, commit.ErrNonInteger) {
			t.Errorf("%s: refusal %v", name, err)
		}
	}
}

func mustParams(t *testing.T, s string) commit.Commitment {
	t.Helper()
	c, err := commit.Params([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
