package verify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
)

// The reference set (testdata/policies) as ledgerd loads it, with the
// declarations, and another set, allowing everything.
var ref struct {
	once  sync.Once
	decls []*declare.Declaration
	live  *policy.Set
	other *policy.Set
	err   error
}

func reference(t testing.TB) (decls []*declare.Declaration, live, other *policy.Set) {
	t.Helper()
	ref.once.Do(func() {
		if ref.decls, ref.err = referencecalls.Declarations(filepath.Join("..", "testdata", "declarations")); ref.err != nil {
			return
		}
		if ref.live, ref.err = policy.Load(filepath.Join("..", "testdata", "policies"), ref.decls); ref.err != nil {
			return
		}
		ref.other, ref.err = policy.New([]policy.File{{Name: "allow-all.cedar",
			Bytes: []byte("@id(\"allow-all\")\npermit (principal, action, resource);\n")}}, ref.decls)
	})
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	return ref.decls, ref.live, ref.other
}

// decisionLog builds a log of ledger decisions with the real ledger.
type decisionLog struct {
	t       testing.TB
	l       *ledger.Ledger
	key     *verify.Key
	decls   []*declare.Declaration
	bundles map[commit.Digest][]byte
}

// newDecisionLog opens a ledger signing with skey (a new key if empty),
// so that a forged log can be signed with an honest one's key.
func newDecisionLog(t testing.TB, skey string) *decisionLog {
	t.Helper()
	if skey == "" {
		var err error
		if skey, _, err = ledger.GenerateKey("ledger.example.com/decisions"); err != nil {
			t.Fatal(err)
		}
	}
	lk, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := verify.ParseKey(lk.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(context.Background(), memory.New(), lk, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	decls, _, _ := reference(t)
	return &decisionLog{t: t, l: l, key: key, decls: decls, bundles: map[commit.Digest][]byte{}}
}

func (d *decisionLog) append(r ledger.Record) {
	d.t.Helper()
	if _, err := d.l.Append(context.Background(), r); err != nil {
		d.t.Fatal(err)
	}
}

func (d *decisionLog) publish(s *policy.Set) {
	d.t.Helper()
	d.bundles[s.Digest()] = s.Bundle()
	d.append(ledger.Record{Kind: entry.KindPolicySet, PolicySet: s.Digest()})
}

// record is the record of a call: decided by s (kind decision), or by a
// mediator (s nil, a version 2 entry).
func (d *decisionLog) record(c referencecalls.Call, s *policy.Set) ledger.Record {
	d.t.Helper()
	m, err := referencecalls.Minimize(d.decls, c)
	if err != nil {
		d.t.Fatal(err)
	}
	var def commit.Digest
	for _, decl := range d.decls {
		if decl.Action == c.Action {
			if def, err = decl.Digest(); err != nil {
				d.t.Fatal(err)
			}
		}
	}
	r := ledger.Record{Mediator: "mediator-1", Principal: c.Principal, Action: c.Action,
		Params: m.Params, Tiers: m.Tiers, Attributes: m.Attributes, Definition: def,
		Decision: c.Decision, Policies: c.Determining}
	if s != nil {
		res := s.Decide(c.Principal, c.Action, m.Attributes)
		if res.Invalid != nil {
			d.t.Fatalf("%s: %v", c.Name, res.Invalid)
		}
		r.Kind, r.PolicySet = entry.KindDecision, s.Digest()
		r.Decision, r.Policies, r.PolicyErrors = res.Decision, res.Determining, res.Errored
	}
	return r
}

// export exports [start, end) at a new checkpoint, with the policy sets
// when sets is true.
func (d *decisionLog) export(start, end uint64, sets bool) []byte {
	d.t.Helper()
	ctx := context.Background()
	if _, err := d.l.Publish(ctx); err != nil {
		d.t.Fatal(err)
	}
	var opts ledger.ExportOptions
	if sets {
		opts.PolicySet = func(_ context.Context, digest commit.Digest) ([]byte, error) {
			if b, ok := d.bundles[digest]; ok {
				return b, nil
			}
			return nil, fmt.Errorf("no policy set %s", digest)
		}
	}
	var buf bytes.Buffer
	if err := d.l.Export(ctx, &buf, start, end, opts); err != nil {
		d.t.Fatal(err)
	}
	return buf.Bytes()
}

// referenceLog is the honest log: entry 0 a mediator's decision, entry 1
// the publication of the reference set, then the reference table decided
// with it (entries 2 to 46), a mediator's decision last (47). edit, if
// set, may change the record of entry i (the forger's hand).
func referenceLog(t testing.TB, skey string, edit func(i int, r *ledger.Record, d *decisionLog)) *decisionLog {
	t.Helper()
	_, live, _ := reference(t)
	d := newDecisionLog(t, skey)
	table := referencecalls.Table()
	var recs []ledger.Record
	recs = append(recs, d.record(table[0], nil))
	d.bundles[live.Digest()] = live.Bundle()
	recs = append(recs, ledger.Record{Kind: entry.KindPolicySet, PolicySet: live.Digest()})
	for _, c := range table {
		recs = append(recs, d.record(c, live))
	}
	recs = append(recs, d.record(table[5], nil))
	for i, r := range recs {
		if edit != nil {
			edit(i, &r, d)
		}
		d.append(r)
	}
	return d
}

const referenceEntries = 48

func verifyDecisions(t testing.TB, key *verify.Key, export []byte, sets ...*policy.Set) *verify.DecisionReport {
	t.Helper()
	rep, err := verify.VerifyDecisions(bytes.NewReader(export), key, verify.DecisionOptions{Sets: sets})
	if err != nil {
		t.Fatalf("verify decisions: %v", err)
	}
	return rep
}

func TestDecisionsHonest(t *testing.T) {
	_, live, _ := reference(t)
	d := referenceLog(t, "", nil)
	withSets := d.export(0, referenceEntries, true)
	rep := verifyDecisions(t, d.key, withSets)
	if !rep.OK() || rep.Decisions != 45 || rep.Agreed != 45 || rep.Replayed != 45 || rep.Mediated != 2 ||
		rep.Publications != 1 || len(rep.Failed) != 0 || rep.Unpublished != 0 {
		t.Fatalf("honest log: %+v", rep)
	}
	if _, ok := rep.Export.PolicySets[live.Digest()]; !ok || len(rep.Export.PolicySets) != 1 {
		t.Errorf("the export's sets: %v", rep.Export.PolicySets)
	}

	// Without frames: the auditor's copy of the set replays, in one
	// reading; without either, nothing is replayed.
	plain := d.export(0, referenceEntries, false)
	replay, err := policy.NewReplay(live.Files())
	if err != nil {
		t.Fatal(err)
	}
	if rep := verifyDecisions(t, d.key, plain, replay); !rep.OK() || rep.Agreed != 45 {
		t.Errorf("with the auditor's set: %+v", rep)
	}
	rep = verifyDecisions(t, d.key, plain)
	if rep.OK() || rep.Unavailable != 45 || rep.Replayed != 0 || len(rep.Failed) != 45 ||
		rep.Failed[0].Index != 2 || rep.Failed[0].Outcome != verify.OutcomeUnavailable {
		t.Errorf("without the set: %+v", rep)
	}
}

// The lying ledger: a copy of the log re-signed with its own key, one
// entry's decision, policies or policy_errors changed, or naming another
// published set. The export verifies; its replay names the entry.
func TestDecisionsLyingLedger(t *testing.T) {
	skey, _, err := ledger.GenerateKey("ledger.example.com/decisions")
	if err != nil {
		t.Fatal(err)
	}
	_, _, other := reference(t)
	const forged = 7 // "unknown payee": deny by payments.deny-unknown-payee
	for _, c := range []struct {
		name    string
		edit    func(r *ledger.Record)
		members []string
	}{
		{"decision", func(r *ledger.Record) { r.Decision = entry.NeedsApproval }, []string{"decision"}},
		{"policies", func(r *ledger.Record) { r.Policies = []string{"payments.deny-non-positive"} }, []string{"policies"}},
		{"policy_errors", func(r *ledger.Record) {
			r.PolicyErrors = []string{"payments.deny-unknown-payee"}
		}, []string{"policy_errors"}},
		{"another set", func(r *ledger.Record) { r.PolicySet = other.Digest() }, []string{"decision", "policies"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := referenceLog(t, skey, func(i int, r *ledger.Record, d *decisionLog) {
				switch i {
				case 1: // the other set is published too, before the lie
					d.publish(other)
				case forged:
					c.edit(r)
				}
			})
			export := d.export(0, referenceEntries+1, true)
			if _, err := verify.VerifyExport(bytes.NewReader(export), d.key, verify.ExportOptions{}); err != nil {
				t.Fatalf("the lying export does not verify: %v", err)
			}
			rep := verifyDecisions(t, d.key, export)
			if rep.OK() || rep.Disagreed != 1 || rep.Agreed != 44 || len(rep.Failed) != 1 {
				t.Fatalf("%+v", rep)
			}
			f := rep.Failed[0]
			var members []string
			for _, diff := range f.Differences {
				members = append(members, diff.Member)
			}
			if f.Index != forged+1 || f.Outcome != verify.OutcomeDisagree || !slices.Equal(members, c.members) {
				t.Errorf("failure %+v, members %v, want entry %d %v", f, members, forged+1, c.members)
			}
		})
	}
}

// A decision must follow the publication of its set: a failure in an
// export of the whole history, not one in an export of its tail.
func TestDecisionsPublication(t *testing.T) {
	_, live, _ := reference(t)
	d := newDecisionLog(t, "")
	table := referencecalls.Table()
	d.bundles[live.Digest()] = live.Bundle()
	d.append(d.record(table[0], live)) // 0: before the publication
	d.publish(live)                    // 1
	d.append(d.record(table[1], live)) // 2
	d.append(d.record(table[2], live)) // 3

	rep := verifyDecisions(t, d.key, d.export(0, 4, true))
	if rep.OK() || rep.Unpublished != 1 || rep.Agreed != 3 || len(rep.Failed) != 1 ||
		rep.Failed[0].Index != 0 || rep.Failed[0].Publication != verify.Unpublished || rep.Failed[0].Outcome != verify.OutcomeAgree {
		t.Errorf("whole history: %+v", rep)
	}
	rep = verifyDecisions(t, d.key, d.export(2, 4, true))
	if !rep.OK() || rep.NotInRange != 2 || rep.Agreed != 2 || !slices.Equal(rep.NotPublishedInRange, []commit.Digest{live.Digest()}) {
		t.Errorf("tail: %+v", rep)
	}
	rep = verifyDecisions(t, d.key, d.export(1, 4, true))
	if !rep.OK() || rep.NotInRange != 0 || rep.Publications != 1 {
		t.Errorf("from the publication: %+v", rep)
	}
}

// A set the auditor supplies must be one an entry names.
func TestDecisionsUnnamedSet(t *testing.T) {
	_, live, other := reference(t)
	d := referenceLog(t, "", nil)
	_, err := verify.VerifyDecisions(bytes.NewReader(d.export(0, referenceEntries, false)), d.key,
		verify.DecisionOptions{Sets: []*policy.Set{live, other}})
	var ue *verify.UnnamedSetError
	if !errors.As(err, &ue) || ue.Digest != other.Digest() {
		t.Fatalf("got %v, want an *UnnamedSetError for %s", err, other.Digest())
	}
}

// The reader refuses policy-set frames that are not bundles, repeat a
// set, carry one no entry names, come out of order or before an entry.
func TestExportPolicySetFrames(t *testing.T) {
	_, live, other := reference(t)
	d := newDecisionLog(t, "")
	table := referencecalls.Table()
	d.publish(live)
	d.publish(other)
	d.append(d.record(table[0], live))
	d.append(d.record(table[1], other))
	good := d.export(0, 4, true)
	if rep, err := verify.VerifyExport(bytes.NewReader(good), d.key, verify.ExportOptions{}); err != nil ||
		len(rep.PolicySets) != 2 || !slices.Equal(rep.Named, []commit.Digest{live.Digest(), other.Digest()}) {
		t.Fatalf("%v %+v", err, rep)
	}

	// Split the file into what comes before the sets, the two frames,
	// and the end frame.
	first := bytes.Index(good, []byte("\npolicy-set "))
	second := bytes.LastIndex(good, []byte("\npolicy-set "))
	endAt := bytes.LastIndex(good, []byte("\nend 0\n"))
	head, f1, f2, tail := good[:first+1], good[first+1:second+1], good[second+1:endAt+1], good[endAt+1:]
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	liveFrame := f1
	flipped := bytes.Clone(f1)
	flipped[len(flipped)-3] ^= 1 // inside the last policy's text
	lastEntry := bytes.LastIndex(head, []byte("\nentry "))
	for _, c := range []struct {
		name, file []byte
		want       string
	}{
		{[]byte("one byte of a bundle changed"), cat(head, flipped, f2, tail), "policy-set frame 1 (frame 9 of the file): format: policy set sha256:"},
		{[]byte("a set repeated"), cat(head, f1, f2, liveFrame, tail), "policy-set frame 3 (frame 11 of the file): format: policy set " + live.Digest().String() + " again"},
		{[]byte("out of order"), cat(head, f2, f1, tail), "policy-set frame 2 (frame 10 of the file): format: policy set " + live.Digest().String() + " out of order"},
		{[]byte("not a bundle"), cat(head, []byte("policy-set 3\nabc\n"), tail), "policy-set frame 1 (frame 9 of the file): format: not a policy bundle"},
		{[]byte("an entry after a set"), cat(head, f1, good[lastEntry+1:first+1], tail), `frame 10 is "entry", want the end`},
	} {
		_, err := verify.VerifyExport(bytes.NewReader(c.file), d.key, verify.ExportOptions{})
		var f *verify.Failure
		if !errors.As(err, &f) || f.Check != verify.CheckFormat || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// One set only (a subsequence, in order) is accepted.
	if rep, err := verify.VerifyExport(bytes.NewReader(cat(head, f2, tail)), d.key, verify.ExportOptions{}); err != nil || len(rep.PolicySets) != 1 {
		t.Errorf("one set of two: %v", err)
	}
}

// switching reads one file, and another after seeking to its start.
type switching struct {
	*bytes.Reader
	second []byte
}

func (s *switching) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekStart {
		s.Reader = bytes.NewReader(s.second)
	}
	return s.Reader.Seek(offset, whence)
}

// The second reading must be of the same export.
func TestDecisionsFileChanged(t *testing.T) {
	d := referenceLog(t, "", nil)
	first := d.export(0, referenceEntries, true)
	d.append(d.record(referencecalls.Table()[0], nil))
	second := d.export(0, referenceEntries, true) // at a newer checkpoint
	if _, err := verify.VerifyDecisions(&switching{bytes.NewReader(first), first}, d.key, verify.DecisionOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := verify.VerifyDecisions(&switching{bytes.NewReader(first), second}, d.key, verify.DecisionOptions{})
	var f *verify.Failure
	if !errors.As(err, &f) || !strings.Contains(err.Error(), "changed between its two readings") {
		t.Fatalf("got %v", err)
	}
}
