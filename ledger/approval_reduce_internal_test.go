package ledger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"pgregory.net/rapid"
)

// The reduction of closed approvals (approval.go) is checked against
// refApprovals, the lifecycle's rules as the ledger enforced them before
// any reduction: every approval's whole record, kept for ever. It is a
// copy of that code, kept here as the reference, not a second use of
// the code under test.

type refApproval struct {
	id                          commit.Digest
	request                     uint64
	requestTime                 int64
	mediator, principal, action string
	params                      commit.Commitment
	pending                     int64
	verdict                     entry.Verdict
	verdictIndex                uint64
	approver                    string
	execution                   int64
	consumption                 uint64
	outcome                     entry.Result
	outcomeIndex                uint64
}

type refApprovals struct {
	configured               bool
	pendingTTL, executionTTL time.Duration
	byID                     map[commit.Digest]*refApproval
	byConsumption            map[uint64]*refApproval
}

func newRefApprovals() *refApprovals {
	return &refApprovals{byID: map[commit.Digest]*refApproval{}, byConsumption: map[uint64]*refApproval{}}
}

func (s *refApprovals) lookup(e *entry.Entry, rebuild bool) (*refApproval, error) {
	a := s.byID[e.ApprovalID]
	if a == nil || a.request >= e.Index || (rebuild && e.Request != a.request) {
		return nil, refuse(CodeNotFound, "")
	}
	e.Request = a.request
	return a, nil
}

func (s *refApprovals) admit(e *entry.Entry, rebuild bool) (func(hash commit.Digest), error) {
	t := micros(e.Time)
	switch e.Kind {
	case "", entry.KindDecision:
		if e.Decision != entry.NeedsApproval || !s.configured {
			return nil, nil
		}
		a := &refApproval{request: e.Index, requestTime: t, mediator: e.Mediator, principal: e.Principal, action: e.Action,
			params: e.Params, pending: t + s.pendingTTL.Microseconds()}
		return func(h commit.Digest) { a.id = h; s.byID[h] = a }, nil
	case entry.KindApprovalConfig:
		return func(commit.Digest) { s.configured, s.pendingTTL, s.executionTTL = true, e.PendingTTL, e.ExecutionTTL }, nil
	case entry.KindApproval:
		a, err := s.lookup(e, rebuild)
		if err != nil {
			return nil, err
		}
		switch {
		case a.verdict != "":
			return nil, refuse(CodeDecided, "")
		case t >= a.pending:
			return nil, refuse(CodeExpired, "")
		case e.Approver == a.principal:
			return nil, refuse(CodeSelf, "")
		}
		verdict, approver, index := e.Verdict, e.Approver, e.Index
		execution := t + s.executionTTL.Microseconds()
		return func(commit.Digest) {
			a.verdict, a.approver, a.verdictIndex = verdict, approver, index
			if verdict == entry.Approve {
				a.execution = execution
			}
		}, nil
	case entry.KindConsumption:
		a, err := s.lookup(e, rebuild)
		if err != nil {
			return nil, err
		}
		switch {
		case a.verdict == "" && t < a.pending:
			return nil, refuse(CodePending, "")
		case a.verdict == "":
			return nil, refuse(CodeExpired, "")
		case a.verdict == entry.Approve && t >= a.execution:
			return nil, refuse(CodeExpired, "")
		case a.verdict != entry.Approve:
			return nil, refuse(CodeDenied, "")
		case a.consumption != 0:
			return nil, refuse(CodeConsumed, "")
		case e.Action != a.action:
			return nil, refuse(CodeMismatch, codeTermAction)
		case e.Principal != a.principal:
			return nil, refuse(CodeMismatch, codeTermPrincipal)
		case e.Mediator != a.mediator:
			return nil, refuse(CodeMismatch, codeTermMediator)
		case e.Params.Digest != a.params.Digest:
			return nil, refuse(CodeDigestMismatch, codeTermParamsDigest)
		case e.Params.Size != a.params.Size:
			return nil, refuse(CodeDigestMismatch, codeTermParamsSize)
		}
		index := e.Index
		return func(commit.Digest) { a.consumption = index; s.byConsumption[index] = a }, nil
	case entry.KindOutcome:
		a := s.byConsumption[e.Consumption]
		switch {
		case a == nil:
			return nil, refuse(CodeNoConsumption, "")
		case a.id != e.ApprovalID:
			return nil, refuse(CodeMismatch, codeTermApproval)
		case e.Mediator != a.mediator:
			return nil, refuse(CodeMismatch, codeTermMediator)
		case a.outcome == entry.Succeeded || a.outcome == entry.Failed:
			return nil, refuse(CodeOutcomeFinal, "")
		}
		result, index := e.Result, e.Index
		return func(commit.Digest) { a.outcome, a.outcomeIndex = result, index }, nil
	}
	return nil, nil
}

// status is the reference's ApprovalStatus of a, as the durable entries
// [0, durable) tell it.
func (a *refApproval) status(durable uint64) ApprovalStatus {
	st := ApprovalStatus{ID: a.id, Request: a.request, RequestTime: fromMicros(a.requestTime), Mediator: a.mediator,
		Principal: a.principal, Action: a.action, Params: a.params, PendingDeadline: fromMicros(a.pending)}
	if a.verdict == "" || a.verdictIndex >= durable {
		return st
	}
	st.Verdict, st.VerdictIndex, st.Approver = a.verdict, a.verdictIndex, a.approver
	if a.verdict == entry.Approve {
		st.ExecutionDeadline = fromMicros(a.execution)
	}
	if a.consumption != 0 && a.consumption < durable {
		st.Consumed, st.Consumption = true, a.consumption
		if a.outcome != "" && a.outcomeIndex < durable {
			st.Outcome, st.OutcomeIndex = a.outcome, a.outcomeIndex
		}
	}
	return st
}

// codeOf is err's refusal code and term, "" for none.
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	var ae *ApprovalError
	if !errors.As(err, &ae) {
		return "error: " + err.Error()
	}
	return ae.Code + "/" + ae.Term
}

// sameStatus compares a status of the reduced state with the
// reference's: equal, but for what a reduced one does not keep.
func sameStatus(got, want ApprovalStatus) bool {
	if got.Reduced {
		got.RequestTime, got.Mediator, got.Principal, got.Action, got.Params, got.Approver =
			want.RequestTime, want.Mediator, want.Principal, want.Action, want.Params, want.Approver
		got.Reduced = false
	}
	return got == want
}

// fataler is what lifecycle needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// lifecycle drives the state under test and the reference with the same
// entries, checking that every entry gets the same answer.
type lifecycle struct {
	t       fataler
	s       *approvals
	ref     *refApprovals
	rebuild bool
}

// admit admits e into both; it reports the answer, and applies e to both
// if it was admitted and apply is set.
func (l *lifecycle) admit(e *entry.Entry, apply bool) string {
	l.t.Helper()
	e1, e2 := *e, *e
	a1, err1 := l.s.admit(&e1, l.rebuild)
	a2, err2 := l.ref.admit(&e2, l.rebuild)
	if c1, c2 := codeOf(err1), codeOf(err2); c1 != c2 {
		l.t.Fatalf("entry %d (%s at %s): %q, the rules without reduction say %q", e.Index, kindOf(e), e.Time.Format(entry.TimeLayout), c1, c2)
	}
	if e1.Request != e2.Request {
		l.t.Fatalf("entry %d: request %d, the rules without reduction fill %d", e.Index, e1.Request, e2.Request)
	}
	if err1 == nil && apply {
		h := fixtureID(e.Index)
		if a1 != nil {
			a1(h)
		}
		if a2 != nil {
			a2(h)
		}
	}
	return codeOf(err1)
}

func kindOf(e *entry.Entry) string {
	if e.Kind == "" {
		return string(e.Decision)
	}
	return string(e.Kind)
}

// compare checks that every approval the reference holds is reported
// alike, as the durable entries [0, durable) tell it.
func (l *lifecycle) compare(durable uint64) {
	l.t.Helper()
	if got, want := l.s.count(), len(l.ref.byID); got != want {
		l.t.Fatalf("%d approvals, the reference has %d", got, want)
	}
	for id, a := range l.ref.byID {
		want, wok := ApprovalStatus{}, a.request < durable
		if wok {
			want = a.status(durable)
		}
		got, ok := l.s.statusOf(id, durable)
		if ok != wok || !sameStatus(got, want) {
			l.t.Fatalf("approval of request %d, durable %d: %+v, %v; the reference says %+v, %v", a.request, durable, got, ok, want, wok)
		}
	}
}

// roundTrip replaces the state under test by its snapshot, decoded,
// checking that the decoded state encodes to the same bytes.
func (l *lifecycle) roundTrip(size uint64) {
	l.t.Helper()
	root := make([]byte, HashSize)
	b := l.s.encodeSnapshot(size, root, 3)
	n, _, refused, s, err := decodeSnapshot(b)
	if err != nil || n != size || refused != 3 {
		l.t.Fatalf("decoding the snapshot: %v (size %d, refused %d)", err, n, refused)
	}
	if again := s.encodeSnapshot(size, root, 3); !bytes.Equal(again, b) {
		l.t.Fatal("the decoded snapshot encodes to other bytes")
	}
	l.s = s
}

// Property: with closed approvals reduced, every verdict, consumption and
// outcome gets the answer the rules give without reduction, and every
// approval is reported alike, through snapshots too. The lifecycles are
// random: requests, verdicts (by the principal too), consumptions with
// equal and other terms, outcomes naming other approvals and
// consumptions, TTL changes, times at, just before and after deadlines;
// as the sequencer admits them (a refused record's index and time are
// the next one's to take) or as Open replays a log (with wrong request
// indexes too).
func TestApprovalReductionEquivalence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := &lifecycle{t: t, s: newApprovals(), ref: newRefApprovals(), rebuild: rapid.Bool().Draw(t, "rebuild")}
		names := []string{"mediator-1", "mediator-2", "agent-1", "agent-2", "alice"}
		paramsOf := []commit.Commitment{
			{Digest: sha256.Sum256([]byte("a")), Size: 10}, {Digest: sha256.Sum256([]byte("a")), Size: 11},
			{Digest: sha256.Sum256([]byte("b")), Size: 10},
		}
		type req struct {
			index                       uint64
			mediator, principal, action string
			params                      commit.Commitment
		}
		var reqs []req
		reqAt := map[uint64]req{}
		type consumption struct {
			req
			index uint64
		}
		var consumed []consumption
		var deadlines []int64
		now := micros(fixtureT0)
		var index uint64
		steps := rapid.IntRange(1, 120).Draw(t, "steps")
		for step := range steps {
			// The time: now, a little later, or at or just before a
			// deadline of the reference's (if it is not past).
			at := now
			switch rapid.IntRange(0, 4).Draw(t, "when") {
			case 1:
				at += rapid.Int64Range(1, 3*60e6).Draw(t, "later")
			case 2, 3:
				if len(deadlines) > 0 {
					d := rapid.SampledFrom(deadlines).Draw(t, "deadline") - rapid.Int64Range(0, 1).Draw(t, "before")
					at = max(at, d)
				}
			case 4:
				at += rapid.Int64Range(1, 30*60e6).Draw(t, "much later")
			}
			e := &entry.Entry{Index: index, Time: fromMicros(at)}
			pickReq := func() req {
				if len(reqs) == 0 || rapid.IntRange(0, 9).Draw(t, "unknown approval") == 0 {
					return req{index: rapid.Uint64Range(0, index).Draw(t, "unknown request")}
				}
				return rapid.SampledFrom(reqs).Draw(t, "approval")
			}
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op == 0 || step == 0 && rapid.Bool().Draw(t, "configure first"):
				e.Kind = entry.KindApprovalConfig
				e.PendingTTL = time.Duration(rapid.IntRange(1, 20).Draw(t, "pending TTL")) * time.Minute
				e.ExecutionTTL = time.Duration(rapid.IntRange(1, 10).Draw(t, "execution TTL")) * time.Minute
			case op <= 2:
				e.Decision = entry.NeedsApproval
				if rapid.IntRange(0, 5).Draw(t, "plain") == 0 {
					e.Decision = entry.Allow
				}
				e.Mediator, e.Principal = rapid.SampledFrom(names[:2]).Draw(t, "mediator"), rapid.SampledFrom(names[2:4]).Draw(t, "principal")
				e.Action, e.Params = rapid.SampledFrom([]string{"pay", "send"}).Draw(t, "action"), rapid.SampledFrom(paramsOf).Draw(t, "params")
			case op <= 4:
				r := pickReq()
				e.Kind, e.ApprovalID, e.Request = entry.KindApproval, fixtureID(r.index), r.index
				e.Approver = rapid.SampledFrom(names[2:]).Draw(t, "approver")
				e.Verdict = rapid.SampledFrom([]entry.Verdict{entry.Approve, entry.Approve, entry.Reject}).Draw(t, "verdict")
			case op <= 7:
				r := pickReq()
				e.Kind, e.ApprovalID, e.Request = entry.KindConsumption, fixtureID(r.index), r.index
				e.Mediator, e.Principal, e.Action, e.Params = r.mediator, r.principal, r.action, r.params
				switch rapid.IntRange(0, 9).Draw(t, "terms") {
				case 1:
					e.Action = "other"
				case 2:
					e.Principal = "agent-3"
				case 3:
					e.Mediator = "mediator-3"
				case 4:
					e.Params.Digest[0] ^= 1
				case 5:
					e.Params.Size++
				}
			default:
				// Mostly an outcome of a consumption, with its approval.
				r, c := pickReq(), rapid.Uint64Range(0, index).Draw(t, "consumption")
				if len(consumed) > 0 && rapid.IntRange(0, 4).Draw(t, "of a consumption") > 0 {
					k := rapid.SampledFrom(consumed).Draw(t, "consumed")
					r, c = k.req, k.index
					if rapid.IntRange(0, 5).Draw(t, "another approval") == 0 {
						r = pickReq()
					}
				}
				e.Kind, e.ApprovalID, e.Consumption, e.Mediator = entry.KindOutcome, fixtureID(r.index), c, r.mediator
				if rapid.IntRange(0, 7).Draw(t, "another mediator") == 0 {
					e.Mediator = rapid.SampledFrom([]string{"mediator-1", "mediator-2", "mediator-3"}).Draw(t, "mediator")
				}
				e.Result = rapid.SampledFrom([]entry.Result{entry.Unknown, entry.Unknown, entry.Succeeded, entry.Failed}).Draw(t, "result")
			}
			if l.rebuild && e.Request != 0 && rapid.IntRange(0, 9).Draw(t, "wrong request") == 0 {
				e.Request++
			}
			if !l.rebuild && rapid.IntRange(0, 19).Draw(t, "not chained") == 0 {
				// Admitted, then not chained (signing it failed): its
				// index and time are the next record's to take.
				l.admit(e, false)
				continue
			}
			code := l.admit(e, true)
			if code == "" || l.rebuild { // the log's next index
				now = at
				index++
				switch {
				case code != "":
				case e.Kind == "" && e.Decision == entry.NeedsApproval && l.ref.byID[fixtureID(e.Index)] != nil:
					reqs = append(reqs, req{e.Index, e.Mediator, e.Principal, e.Action, e.Params})
					reqAt[e.Index] = reqs[len(reqs)-1]
					deadlines = append(deadlines, l.ref.byID[fixtureID(e.Index)].pending)
				case e.Kind == entry.KindApproval && e.Verdict == entry.Approve:
					deadlines = append(deadlines, l.ref.byID[e.ApprovalID].execution)
				case e.Kind == entry.KindConsumption:
					consumed = append(consumed, consumption{reqAt[e.Request], e.Index})
				}
			}
			l.compare(rapid.Uint64Range(0, index).Draw(t, "durable"))
			if rapid.IntRange(0, 9).Draw(t, "snapshot") == 0 {
				l.roundTrip(index)
			}
		}
	})
}

// The closing paths on purpose: fixtureLifecycle leaves an approval
// closed each way (consumed with an unknown, a succeeded and a failed
// outcome and without one, denied, expired pending, lapsed) and two open;
// every kind of later entry, with equal and other terms, at and just
// before each deadline still ahead and after them, gets the answer of the
// rules without reduction: from the state the entries build, from its
// snapshot, and from the version 1 snapshot the code before reduction
// wrote of the same entries (testdata/approvals-v1.snap).
func TestApprovalReductionPaths(t *testing.T) {
	list := fixtureLifecycle()
	size := uint64(len(list))
	drive := func(s *approvals) *lifecycle {
		l := &lifecycle{t: t, s: s, ref: newRefApprovals()}
		for _, e := range list {
			if code := l.admit(e, true); code != "" {
				t.Fatalf("fixture entry %d refused: %s", e.Index, code)
			}
		}
		return l
	}
	built := drive(newApprovals())
	snap := drive(newApprovals())
	snap.roundTrip(size)
	v1, err := os.ReadFile("testdata/approvals-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v1[len(snapshotMagic)] != 1 {
		t.Fatal("testdata/approvals-v1.snap is not a version 1 snapshot")
	}
	n, _, _, s1, err := decodeSnapshot(v1)
	if err != nil || n != size {
		t.Fatalf("reading the version 1 snapshot: %v (size %d, want %d)", err, n, size)
	}
	old := drive(newApprovals()) // its reference
	old.s = s1
	root := make([]byte, HashSize)
	for i := range root {
		root[i] = byte(i)
	}
	if !bytes.Equal(encodeSnapshotV1(old.ref, size, root, 0), v1) {
		t.Fatal("encodeSnapshotV1 does not write what the version 1 encoder wrote")
	}
	if len(s1.closed) != 5 || len(s1.open) != 5 { // denied and consumed closed as it is read
		t.Fatalf("version 1 snapshot read: %d closed, %d open; want 5, 5", len(s1.closed), len(s1.open))
	}
	states := map[string]*lifecycle{"built": built, "snapshot": snap, "version 1": old}

	ids := []uint64{1, 5, 7, 8, 10, 14, 18, 20, 21, 25, 99}
	request := map[uint64]*entry.Entry{}
	for _, e := range list {
		if e.Decision == entry.NeedsApproval {
			request[e.Index] = e
		}
	}
	consumptions := map[uint64]uint64{3: 1, 12: 10, 16: 14, 23: 21, 2: 1, 99: 5}
	min := func(m int64) time.Time { return fixtureT0.Add(time.Duration(m) * time.Minute) }
	ticks := []time.Time{min(21), min(25).Add(-time.Microsecond), min(25), min(30).Add(-time.Microsecond), min(30),
		min(81).Add(-time.Microsecond), min(81), min(200)}
	index := size
	for i, at := range ticks {
		for name, l := range states {
			// An entry at at, chained: what settles time for the probes.
			if code := l.admit(&entry.Entry{Kind: entry.KindApprovalConfig, Index: index, Time: at,
				PendingTTL: time.Hour, ExecutionTTL: 2 * time.Minute}, true); code != "" {
				t.Fatalf("%s: the tick at %s refused: %s", name, at, code)
			}
			// Reduced once the tick before passed their deadlines: all
			// but the approvals requested at 20 (until 30 min) and 25
			// (until 81 min).
			want := 8
			switch {
			case i >= 7:
				want = 10
			case i >= 5:
				want = 9
			}
			if i > 0 && len(l.s.closed) != want {
				t.Errorf("%s at %s: %d approvals reduced, want %d", name, at.Format(entry.TimeLayout), len(l.s.closed), want)
			}
		}
		index++
		probes := []*entry.Entry{}
		for _, r := range ids {
			id := fixtureID(r)
			q := request[r]
			if q == nil {
				q = request[1]
			}
			for _, approver := range []string{"alice", q.Principal} {
				probes = append(probes, &entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: r, Approver: approver, Verdict: entry.Approve})
			}
			for change := range 6 {
				c := &entry.Entry{Kind: entry.KindConsumption, ApprovalID: id, Request: r, Mediator: q.Mediator,
					Principal: q.Principal, Action: q.Action, Params: q.Params}
				switch change {
				case 1:
					c.Action = "other"
				case 2:
					c.Principal = "agent-z"
				case 3:
					c.Mediator = "mediator-9"
				case 4:
					c.Params.Digest[0] ^= 1
				case 5:
					c.Params.Size++
				}
				probes = append(probes, c)
			}
		}
		for c, r := range consumptions {
			for _, owner := range []uint64{r, 5} {
				for _, mediator := range []string{request[r].Mediator, "mediator-9"} {
					probes = append(probes, &entry.Entry{Kind: entry.KindOutcome, ApprovalID: fixtureID(owner), Consumption: c,
						Mediator: mediator, Result: entry.Unknown})
				}
			}
		}
		for _, p := range probes {
			p.Index, p.Time = index, at
			for _, l := range states {
				for _, rebuild := range []bool{false, true} {
					for _, wrong := range []uint64{0, 1} {
						e := *p
						e.Request += wrong
						l.rebuild = rebuild
						l.admit(&e, false)
					}
				}
			}
		}
		for _, l := range states {
			l.rebuild = false
			for _, durable := range []uint64{0, 9, 13, 17, 23, index} {
				l.compare(durable)
			}
		}
	}
}

// An entry admitted but not chained (its signing or its batch failed)
// settles no time: the next record takes its index and may have an
// earlier time (the clock went back to the chained tip's), so an
// approval whose deadline only that entry reached is still pending.
func TestApprovalReductionUnchained(t *testing.T) {
	for _, next := range []string{"plain decision", "refused verdict", "verdict"} {
		t.Run(next, func(t *testing.T) {
			l := &lifecycle{t: t, s: newApprovals(), ref: newRefApprovals()}
			at := func(m time.Duration) time.Time { return fixtureT0.Add(m * time.Minute) }
			l.admit(&entry.Entry{Kind: entry.KindApprovalConfig, Index: 0, Time: at(0), PendingTTL: 10 * time.Minute, ExecutionTTL: 5 * time.Minute}, true)
			q := &entry.Entry{Index: 1, Time: at(0), Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"}
			l.admit(q, true)
			other := &entry.Entry{Index: 2, Time: at(0), Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"}
			l.admit(other, true)
			// Admitted at the pending deadline, not chained.
			if code := l.admit(&entry.Entry{Kind: entry.KindApprovalConfig, Index: 3, Time: at(10), PendingTTL: time.Hour, ExecutionTTL: time.Hour}, false); code != "" {
				t.Fatal(code)
			}
			switch next {
			case "plain decision":
				l.admit(&entry.Entry{Index: 3, Time: at(1), Decision: entry.Allow}, true)
			case "refused verdict":
				if code := l.admit(&entry.Entry{Kind: entry.KindApproval, Index: 3, Time: at(1), ApprovalID: fixtureID(2), Approver: "agent-1", Verdict: entry.Approve}, true); code != CodeSelf+"/" {
					t.Fatalf("self-approval: %q", code)
				}
				l.admit(&entry.Entry{Index: 3, Time: at(1), Decision: entry.Allow}, true)
			case "verdict":
				if code := l.admit(&entry.Entry{Kind: entry.KindApproval, Index: 3, Time: at(1), ApprovalID: fixtureID(2), Approver: "alice", Verdict: entry.Reject}, true); code != "" {
					t.Fatal(code)
				}
			}
			l.admit(&entry.Entry{Kind: entry.KindApproval, Index: 4, Time: at(2), ApprovalID: fixtureID(2), Approver: "bob", Verdict: entry.Approve}, true)
			if code := l.admit(&entry.Entry{Kind: entry.KindConsumption, Index: 4, Time: at(2), ApprovalID: fixtureID(1),
				Mediator: q.Mediator, Principal: q.Principal, Action: q.Action}, true); code != CodePending+"/" {
				t.Fatalf("consumption before the pending deadline: %q", code)
			}
			l.compare(5)
		})
	}
}

// Once a burst of approvals has expired, the open approvals move to a
// new map: a Go map keeps the memory of its largest size.
func TestApprovalShrink(t *testing.T) {
	s := newApprovals()
	drive := driver(t, s)
	drive(&entry.Entry{Kind: entry.KindApprovalConfig, Index: 0, Time: fixtureT0, PendingTTL: time.Minute, ExecutionTTL: time.Minute})
	const n = 10_000
	for i := uint64(1); i <= n; i++ {
		drive(&entry.Entry{Index: i, Time: fixtureT0, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	}
	if s.openPeak != n {
		t.Fatalf("peak %d, want %d", s.openPeak, n)
	}
	later := fixtureT0.Add(time.Hour)
	drive(&entry.Entry{Index: n + 1, Time: later, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	drive(&entry.Entry{Index: n + 2, Time: later, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	if len(s.closed) != n || len(s.open) != 2 || s.openPeak != 2 || cap(s.deadlines) > 16 {
		t.Fatalf("after the burst expired: %d closed, %d open, peak %d, heap capacity %d; want %d, 2, 2, at most 16",
			len(s.closed), len(s.open), s.openPeak, cap(s.deadlines), n)
	}
}

// A snapshot (with a good checksum) decodes only if it is exactly the
// encoding of the state it decodes to (a version 1 one is re-encoded as version 2, so only its
// decoding is checked), and a decoded state encodes to a snapshot that
// decodes again.
func FuzzDecodeSnapshot(f *testing.F) {
	v1, err := os.ReadFile("testdata/approvals-v1.snap")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v1)
	l := &lifecycle{t: f, s: newApprovals(), ref: newRefApprovals()}
	for _, e := range fixtureLifecycle() {
		l.admit(e, true)
	}
	f.Add(l.s.encodeSnapshot(26, make([]byte, HashSize), 2))
	f.Add(newApprovals().encodeSnapshot(0, make([]byte, HashSize), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > sha256.Size {
			// A good checksum, so that the fields are what is fuzzed.
			sum := sha256.Sum256(b[:len(b)-sha256.Size])
			b = append(b[:len(b)-sha256.Size:len(b)-sha256.Size], sum[:]...)
		}
		size, root, refused, s, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again := s.encodeSnapshot(size, root, refused)
		if b[len(snapshotMagic)] == snapshotVersion && !bytes.Equal(again, b) {
			t.Fatalf("decoded, then encoded to other bytes")
		}
		if _, _, _, _, err := decodeSnapshot(again); err != nil {
			t.Fatalf("the re-encoded snapshot does not decode: %v", err)
		}
	})
}

// encodeSnapshotV1 is the version 1 snapshot of ref's state for the
// tree of size entries with root, written from the format's
// description (snapshot.go): every approval whole, in request order.
func encodeSnapshotV1(ref *refApprovals, size uint64, root []byte, refused uint64) []byte {
	list := make([]*refApproval, 0, len(ref.byID))
	for _, a := range ref.byID {
		list = append(list, a)
	}
	slices.SortFunc(list, func(x, y *refApproval) int { return cmp.Compare(x.request, y.request) })
	b := append([]byte(snapshotMagic), 1)
	b = binary.BigEndian.AppendUint64(b, size)
	b = append(b, root...)
	b = binary.BigEndian.AppendUint64(b, refused)
	if ref.configured {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(ref.pendingTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(ref.executionTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(len(list)))
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	u64 := func(v uint64) { b = binary.BigEndian.AppendUint64(b, v) }
	for _, a := range list {
		b = append(b, a.id[:]...)
		u64(a.request)
		u64(uint64(a.requestTime))
		str(a.mediator)
		str(a.principal)
		str(a.action)
		b = append(b, a.params.Digest[:]...)
		u64(uint64(a.params.Size))
		u64(uint64(a.pending))
		str(string(a.verdict))
		u64(a.verdictIndex)
		str(a.approver)
		u64(uint64(a.execution))
		u64(a.consumption)
		str(string(a.outcome))
		u64(a.outcomeIndex)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// snapshotV1Of is the version 1 snapshot of the first size entries of
// store, their state replayed by the rules without reduction as Open
// replayed them before.
func snapshotV1Of(ctx context.Context, store Store, size uint64) ([]byte, error) {
	ref := newRefApprovals()
	var refused uint64
	err := store.ReadEntries(ctx, 0, size, func(index uint64, b []byte) error {
		e, err := entry.Parse(b)
		if err != nil {
			return err
		}
		apply, err := ref.admit(e, true)
		if err != nil {
			refused++
			return nil
		}
		if apply != nil {
			h, err := e.Hash()
			if err != nil {
				return err
			}
			apply(h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	root, err := newTileReader(ctx, store).rootAt(size)
	if err != nil {
		return nil, err
	}
	return encodeSnapshotV1(ref, size, root, refused), nil
}

// A snapshot that lists one closed approval twice (under two requests,
// its checksum good) is refused as damaged.
func TestApprovalSnapshotClosedTwice(t *testing.T) {
	s := newApprovals()
	drive := driver(t, s)
	drive(&entry.Entry{Kind: entry.KindApprovalConfig, Index: 0, Time: fixtureT0, PendingTTL: time.Minute, ExecutionTTL: time.Minute})
	for i := uint64(1); i <= 3; i++ {
		drive(&entry.Entry{Index: i, Time: fixtureT0, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	}
	later := fixtureT0.Add(time.Hour)
	drive(&entry.Entry{Index: 4, Time: later, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	drive(&entry.Entry{Index: 5, Time: later, Decision: entry.NeedsApproval, Mediator: "mediator-1", Principal: "agent-1", Action: "pay"})
	if len(s.closed) != 3 {
		t.Fatalf("%d closed approvals, want 3", len(s.closed))
	}
	good := s.encodeSnapshot(6, make([]byte, HashSize), 0)
	if _, _, _, _, err := decodeSnapshot(good); err != nil {
		t.Fatalf("the snapshot as encoded: %v", err)
	}
	// The closed approvals are the last records before the checksum:
	// the last one takes the id of the one before it.
	b := bytes.Clone(good[:len(good)-sha256.Size])
	last, before := len(b)-closedSize, len(b)-2*closedSize
	copy(b[last:last+32], b[before:before+32])
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	if _, _, _, _, err := decodeSnapshot(b); !errors.Is(err, errSnapshotDamaged) {
		t.Fatalf("a closed approval listed twice: %v, want damaged", err)
	}
}

// driver returns a function that admits an entry to s and applies it
// under the fixture's id for its index, failing t if it is refused.
func driver(t *testing.T, s *approvals) func(*entry.Entry) {
	return func(e *entry.Entry) {
		t.Helper()
		apply, err := s.admit(e, false)
		if err != nil {
			t.Fatal(err)
		}
		apply(fixtureID(e.Index))
	}
}
