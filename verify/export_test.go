package verify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

func (f *fixture) export(t testing.TB, start, end uint64, opts ledger.ExportOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.l.Export(context.Background(), &buf, start, end, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportRoundTrip(t *testing.T) {
	f := newFixture(t, 600)
	for _, r := range [][2]uint64{{0, 600}, {0, 1}, {256, 300}, {599, 600}, {10, 10}} {
		data := f.export(t, r[0], r[1], ledger.ExportOptions{})
		var calls uint64
		report, err := verify.VerifyExport(bytes.NewReader(data), f.key, verify.ExportOptions{
			Progress: func(done, total uint64) { calls = done },
		})
		if err != nil {
			t.Fatalf("range %v: %v", r, err)
		}
		if report.Start != r[0] || report.End != r[1] || report.Checkpoint.Size != 600 || calls != r[1]-r[0] {
			t.Errorf("range %v: report %+v, %d progress calls", r, report, calls)
		}
		if r[1] > 0 {
			last, _ := entry.Parse(f.entries[r[1]-1])
			h, _ := last.Hash()
			if report.LastHash != h {
				t.Errorf("range %v: last hash", r)
			}
		}
	}
	// Chaining two exports: the first one's last hash links the second.
	first, err := verify.VerifyExport(bytes.NewReader(f.export(t, 0, 300, ledger.ExportOptions{})), f.key, verify.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify.VerifyExport(bytes.NewReader(f.export(t, 300, 600, ledger.ExportOptions{})), f.key, verify.ExportOptions{Prev: &first.LastHash}); err != nil {
		t.Fatalf("chained export: %v", err)
	}
	var wrong commit.Digest
	if _, err := verify.VerifyExport(bytes.NewReader(f.export(t, 300, 600, ledger.ExportOptions{})), f.key, verify.ExportOptions{Prev: &wrong}); err == nil {
		t.Fatal("export accepted with a link that differs from the auditor's")
	}
}

func TestExportConsistency(t *testing.T) {
	f := newFixture(t, 100)
	ctx := context.Background()
	older, _ := f.key.Checkpoint(f.checkpoint)
	c2, _ := commit.Params([]byte(`{"n":1}`))
	for range 50 {
		if _, err := f.l.Append(ctx, ledger.Record{Mediator: "m", Principal: "p", Action: "a", Decision: entry.Deny,
			Params: c2, Attributes: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	with := f.export(t, 100, 150, ledger.ExportOptions{ConsistencyFrom: 100})
	report, err := verify.VerifyExport(bytes.NewReader(with), f.key, verify.ExportOptions{Trusted: older})
	if err != nil || report.ConsistencyFrom != 100 {
		t.Fatalf("consistent export: %v %+v", err, report)
	}
	// Without a proof from the trusted size, the error says what to ask
	// for: the same range, with consistency_from=100.
	var ce *verify.ConsistencyError
	without := f.export(t, 100, 150, ledger.ExportOptions{})
	_, err = verify.VerifyExport(bytes.NewReader(without), f.key, verify.ExportOptions{Trusted: older})
	if !isCheck(err, verify.CheckConsistency) || !errors.As(err, &ce) ||
		*ce != (verify.ConsistencyError{TrustedSize: 100, Size: 150, Start: 100, End: 150, Err: ce.Err}) {
		t.Fatalf("export without a proof from the trusted size: %v", err)
	}
	from50 := f.export(t, 120, 150, ledger.ExportOptions{ConsistencyFrom: 50})
	_, err = verify.VerifyExport(bytes.NewReader(from50), f.key, verify.ExportOptions{Trusted: older})
	if !errors.As(err, &ce) || *ce != (verify.ConsistencyError{TrustedSize: 100, Size: 150, Start: 120, End: 150, HasProof: true, ProofFrom: 50, Err: ce.Err}) {
		t.Fatalf("export with a proof from another size: %v", err)
	}
	// An export made at a checkpoint older than the trusted one.
	newer, _ := f.key.Checkpoint(must(f.l.CheckpointAt(ctx, 150)))
	stale := f.export(t, 0, 100, ledger.ExportOptions{Size: 100})
	_, err = verify.VerifyExport(bytes.NewReader(stale), f.key, verify.ExportOptions{Trusted: newer})
	if !isCheck(err, verify.CheckConsistency) || !errors.As(err, &ce) || ce.TrustedSize != 150 || ce.Size != 100 ||
		!strings.Contains(err.Error(), "trusted checkpoint of size 150 is newer than the export's of size 100") {
		t.Fatalf("export at an older checkpoint: %v", err)
	}
	// A fork: another log under the same key name, 150 entries long.
	g := newFixture(t, 150)
	forked := g.export(t, 100, 150, ledger.ExportOptions{ConsistencyFrom: 100})
	gOlder := *older // the auditor trusts f's checkpoint at 100, g signs with its own key
	_, err = verify.VerifyExport(bytes.NewReader(forked), g.key, verify.ExportOptions{Trusted: &gOlder})
	if !isCheck(err, verify.CheckConsistency) || !errors.As(err, &ce) || !ce.HasProof || ce.ProofFrom != 100 {
		t.Fatalf("forked history: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func isCheck(err error, c verify.Check) bool {
	var f *verify.Failure
	return errors.As(err, &f) && f.Check == c
}

// File-level tampering: each is refused, naming where.
func TestExportRefusesTampering(t *testing.T) {
	f := newFixture(t, 300)
	data := f.export(t, 100, 200, ledger.ExportOptions{})
	s := string(data)
	entry117 := string(f.entries[117])
	cases := []struct {
		name  string
		data  string
		check verify.Check
		index int64
	}{
		{"truncated", s[:len(s)/2], verify.CheckFormat, 0},
		{"no-end", strings.TrimSuffix(s, "end 0\n\n"), verify.CheckFormat, 200},
		{"trailing", s + "x", verify.CheckFormat, verify.NoIndex},
		{"bad-header", strings.Replace(s, "ledger-export v1", "ledger-export v2", 1), verify.CheckFormat, verify.NoIndex},
		{"bad-length", strings.Replace(s, "range 7\n", "range 07\n", 1), verify.CheckFormat, verify.NoIndex},
		// Same-length changes, so that the framing still holds.
		{"entry-byte", strings.Replace(s, entry117, strings.Replace(entry117, `"principal":"agent-1"`, `"principal":"agent-2"`, 1), 1), verify.CheckEntrySignature, 117},
		{"foreign-origin", strings.Replace(s, "ledger.example.com/verify\n", "ledger.example.org/verify\n", 1), verify.CheckCheckpointSignature, verify.NoIndex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.data == s {
				t.Fatal("mutation did not apply")
			}
			_, err := verify.VerifyExport(strings.NewReader(c.data), f.key, verify.ExportOptions{})
			var fail *verify.Failure
			if !errors.As(err, &fail) || fail.Check != c.check || (c.index != 0 && fail.Index != c.index) {
				t.Fatalf("got %v, want %s at %d", err, c.check, c.index)
			}
		})
	}
	if _, err := verify.VerifyExport(bytes.NewReader(data), f.otherKey, verify.ExportOptions{}); !isCheck(err, verify.CheckCheckpointSignature) {
		t.Errorf("untrusted key: %v", err)
	}
}

// FuzzVerifyExport: no input panics, and no mutation of a valid export is
// accepted unless it is byte-identical to it.
func FuzzVerifyExport(f *testing.F) {
	fx := newFixture(f, 40)
	f.Add(fx.export(f, 5, 30, ledger.ExportOptions{}))
	f.Add(fx.export(f, 0, 40, ledger.ExportOptions{}))
	f.Add([]byte(verify.ExportHeader))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := verify.VerifyExport(bytes.NewReader(data), fx.key, verify.ExportOptions{All: true})
		if err != nil {
			return
		}
		// An accepted file must be exactly the log's own export of its
		// range: nothing else verifies.
		if again := fx.export(t, r.Start, r.End, ledger.ExportOptions{}); !bytes.Equal(again, data) {
			t.Fatalf("accepted an export that differs from the log's own:\n%q", data)
		}
	})
}

// An export whose entry 3 has an ESC sequence (or another control or
// format character) in its principal, signed by the trusted key (written
// by hand: the entry package refuses to build it), is refused at entry 3
// as an encoding failure naming the member; so is such an entry in a
// tlog-proof file. The same files with a non-ASCII principal verify, so
// the refusal is the character's, not the harness's.
func TestExportRefusesControlCharacterInIdentifier(t *testing.T) {
	// build writes an export of n entries whose entry k has the principal
	// quoted (canonical JSON), and returns its key and frames.
	build := func(n, k int, quoted string) (*verify.Key, []byte, map[string][][]byte) {
		var buf bytes.Buffer
		vkey := writeExportEdited(t, &buf, n, func(i int, m []byte) []byte {
			if i != k {
				return m
			}
			out := bytes.Replace(m, []byte(`"principal":"agent-1"`), []byte(`"principal":`+quoted), 1)
			if bytes.Equal(out, m) {
				t.Fatal("edit did not apply")
			}
			return out
		})
		key, err := verify.ParseKey(vkey)
		if err != nil {
			t.Fatal(err)
		}
		frames := map[string][][]byte{}
		rest := bytes.TrimPrefix(buf.Bytes(), []byte(verify.ExportHeader))
		for len(rest) > 0 {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			tag, size, _ := strings.Cut(string(line), " ")
			n, _ := strconv.Atoi(size)
			frames[tag] = append(frames[tag], after[:n])
			rest = after[n+1:]
		}
		return key, buf.Bytes(), frames
	}
	// tlogProof verifies entry 0 of a one-entry log as a tlog-proof file
	// (the tree is the leaf: no proof hashes).
	tlogProof := func(quoted string) error {
		key, _, frames := build(1, 0, quoted)
		p := &verify.TlogProof{Extra: frames["entry"][0], Index: 0, Checkpoint: frames["checkpoint"][0]}
		_, _, err := verify.VerifyTlogProof(p.Marshal(), key)
		return err
	}

	const valid = `"agent:résumé-bot"`
	key, data, _ := build(6, 3, valid)
	if _, err := verify.VerifyExport(bytes.NewReader(data), key, verify.ExportOptions{}); err != nil {
		t.Fatalf("control: an export with principal %s: %v", valid, err)
	}
	if err := tlogProof(valid); err != nil {
		t.Fatalf("control: a tlog-proof with principal %s: %v", valid, err)
	}

	// The canonical form escapes ESC as \u001b; C1 controls and bidi
	// overrides are UTF-8.
	for _, quoted := range []string{`"agent-1\u001b[2J\u001b[1;1Hverified"`, "\"agent-1\u009b2J\"", "\"agent-1\u202e\""} {
		want := func(what string, err error, index int64) {
			t.Helper()
			var f *verify.Failure
			var fe *entry.FieldError
			if !errors.As(err, &f) || f.Index != index || f.Check != verify.CheckEntryEncoding ||
				!errors.As(err, &fe) || fe.Field != "principal" || !errors.Is(err, entry.ErrIdentifierChar) {
				t.Fatalf("%s, principal %s: got %v, want entry %d: encoding: field principal", what, quoted, err, index)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, fmt.Sprintf("entry %d: encoding: ", index)) ||
				strings.ContainsAny(msg, "\x1b\u009b\u202e") {
				t.Errorf("%s: error %q", what, msg)
			}
		}
		key, data, _ := build(6, 3, quoted)
		_, err := verify.VerifyExport(bytes.NewReader(data), key, verify.ExportOptions{})
		want("export", err, 3)
		_, err = verify.VerifyExport(bytes.NewReader(data), key, verify.ExportOptions{All: true})
		want("export --all", err, 3)
		want("tlog-proof", tlogProof(quoted), 0)
	}
}

// A trusted checkpoint of size 0, the one ledgerd signs at its first
// start, needs no proof: the empty tree is a prefix of every tree (RFC
// 9162 §2.1.4, the empty proof), and ledgerd writes no consistency
// frame for consistency_from=0. Its root must be the empty tree's.
func TestExportTrustedEmptyTree(t *testing.T) {
	f := newFixture(t, 40)
	ctx := context.Background()
	empty, err := f.key.Checkpoint(must(f.l.CheckpointAt(ctx, 0)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]uint64{{0, 40}, {10, 40}} {
		data := f.export(t, r[0], r[1], ledger.ExportOptions{ConsistencyFrom: 0})
		report, err := verify.VerifyExport(bytes.NewReader(data), f.key, verify.ExportOptions{Trusted: empty})
		if err != nil || report.ConsistencyFrom != 0 {
			t.Fatalf("range %v, trusted the empty tree: %v %+v", r, err, report)
		}
	}
	// A size-0 checkpoint with another root, signed by the log's key: no
	// log's empty tree, refused.
	text := tlog.Checkpoint{Origin: f.cp.Origin, Size: 0, Hash: bytes.Repeat([]byte{7}, 32)}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(text)}, f.signWith.Signer())
	if err != nil {
		t.Fatal(err)
	}
	bogus, err := f.key.Checkpoint(signed)
	if err != nil {
		t.Fatal(err)
	}
	var ce *verify.ConsistencyError
	_, err = verify.VerifyExport(bytes.NewReader(f.export(t, 0, 40, ledger.ExportOptions{})), f.key, verify.ExportOptions{Trusted: bogus})
	if !isCheck(err, verify.CheckConsistency) || !errors.As(err, &ce) || ce.TrustedSize != 0 || !errors.Is(err, verify.ErrEmptyTreeRoot) {
		t.Fatalf("trusted size 0 with another root: %v", err)
	}
	if err := verify.Consistency(bogus, f.cp, nil); !errors.Is(err, verify.ErrEmptyTreeRoot) {
		t.Errorf("Consistency from size 0 with another root: %v", err)
	}
	if err := verify.Consistency(empty, f.cp, nil); err != nil {
		t.Errorf("Consistency from the empty tree: %v", err)
	}
}

// OnParsed sees every entry of the range, in order, as entry.Parse
// decodes its bytes, with its entry hash.
func TestExportOnParsed(t *testing.T) {
	f := newFixture(t, 300)
	data := f.export(t, 100, 300, ledger.ExportOptions{})
	next := uint64(100)
	_, err := verify.VerifyExport(bytes.NewReader(data), f.key, verify.ExportOptions{
		OnParsed: func(i uint64, e *entry.Entry, h commit.Digest, b []byte) {
			if i != next || e.Index != i || !bytes.Equal(b, f.entries[i]) {
				t.Fatalf("OnParsed(%d): want entry %d", i, next)
			}
			want, err := entry.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			wh, _ := want.Hash()
			if h != wh || e.Principal != want.Principal || !e.Time.Equal(want.Time) || e.Params != want.Params {
				t.Errorf("entry %d: OnParsed's entry or hash differs from entry.Parse's", i)
			}
			next++
		},
	})
	if err != nil || next != 300 {
		t.Fatalf("verified to %d: %v", next, err)
	}
}
