package verify_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/verify"
)

func TestTlogProof(t *testing.T) {
	f := newFixture(t, 300)
	ctx := context.Background()
	for _, i := range []uint64{0, 1, 255, 256, 299} {
		b, err := f.l.TlogProof(ctx, i, 0)
		if err != nil {
			t.Fatal(err)
		}
		e, cp, err := verify.VerifyTlogProof(b, f.key)
		if err != nil {
			t.Fatalf("index %d: %v", i, err)
		}
		if e.Index != i || cp.Size != 300 {
			t.Errorf("index %d: entry %d, size %d", i, e.Index, cp.Size)
		}
		p, err := verify.ParseTlogProof(b)
		if err != nil || !bytes.Equal(p.Marshal(), b) {
			t.Errorf("index %d: parse/marshal round trip: %v", i, err)
		}
	}
	b, _ := f.l.TlogProof(ctx, 117, 0)
	s := string(b)
	p, _ := verify.ParseTlogProof(b)
	entry117 := string(p.Extra)
	other := *p
	other.Proof = append([][]byte{bytes.Clone(p.Proof[0])}, p.Proof[1:]...)
	other.Proof[0][0] ^= 1
	wrongIndex := *p
	wrongIndex.Index = 118
	changedEntry := *p
	changedEntry.Extra = []byte(strings.Replace(entry117, `"principal":"agent-1"`, `"principal":"agent-2"`, 1))
	cases := []struct {
		name  string
		data  []byte
		check verify.Check
	}{
		{"proof-hash", other.Marshal(), verify.CheckInclusion},
		{"index", wrongIndex.Marshal(), verify.CheckIndex},
		{"entry", changedEntry.Marshal(), verify.CheckEntrySignature},
		{"no-entry", []byte(strings.Replace(s, "extra ", "extrb ", 1)), verify.CheckFormat},
		{"upper-case-header", []byte(strings.Replace(s, "c2sp.org", "C2SP.org", 1)), verify.CheckFormat},
		{"leading-zero-index", []byte(strings.Replace(s, "index 117", "index 0117", 1)), verify.CheckFormat},
		{"checkpoint", []byte(strings.Replace(s, "ledger.example.com/verify\n", "ledger.example.org/verify\n", 1)), verify.CheckCheckpointSignature},
	}
	for _, c := range cases {
		if _, _, err := verify.VerifyTlogProof(c.data, f.key); !isCheck(err, c.check) {
			t.Errorf("%s: got %v, want %s", c.name, err, c.check)
		}
	}
	if _, _, err := verify.VerifyTlogProof(b, f.otherKey); !isCheck(err, verify.CheckCheckpointSignature) {
		t.Errorf("untrusted key: %v", err)
	}
}

// FuzzParseTlogProof: no panic, and whatever parses re-encodes to the same
// bytes.
func FuzzParseTlogProof(f *testing.F) {
	fx := newFixture(f, 20)
	for _, i := range []uint64{0, 7, 19} {
		b, err := fx.l.TlogProof(context.Background(), i, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := verify.ParseTlogProof(data)
		if err != nil {
			return
		}
		if !bytes.Equal(p.Marshal(), data) {
			t.Fatalf("%q re-encodes as %q", data, p.Marshal())
		}
		verify.VerifyTlogProof(data, fx.key) // must not panic
	})
}

// FuzzCheckpoint: opening arbitrary bytes as a checkpoint never panics, and
// whatever opens says exactly what the signed checkpoint says (extra
// signature lines from other keys, such as witness cosignatures, may
// differ).
func FuzzCheckpoint(f *testing.F) {
	fx := newFixture(f, 3)
	f.Add(fx.checkpoint)
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := fx.key.Checkpoint(data)
		if err != nil {
			return
		}
		if cp.Origin != fx.cp.Origin || cp.Size != fx.cp.Size || !bytes.Equal(cp.Hash, fx.cp.Hash) || !bytes.HasPrefix(data, []byte(fx.cp.Origin+"\n")) {
			t.Fatalf("accepted a checkpoint that says something else: %q", data)
		}
	})
}
