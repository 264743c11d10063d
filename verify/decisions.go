package verify

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
)

// Outcome is what replaying one ledger decision gave. The names are
// stable: they appear in ledger-verify's --json output.
type Outcome string

const (
	// OutcomeAgree: the replay gave the recorded decision, policies and
	// policy_errors.
	OutcomeAgree Outcome = "agree"
	// OutcomeDisagree: it gave another decision, other policies or other
	// policy_errors (Differences says which).
	OutcomeDisagree Outcome = "disagree"
	// OutcomeRefused: the set refused the recorded attributes as input
	// (policy.Result.Invalid): the ledger cannot have decided with them.
	OutcomeRefused Outcome = "replay-refused"
	// OutcomeUnavailable: neither the export nor the auditor has the policy set
	// the entry names, so it was not replayed.
	OutcomeUnavailable Outcome = "set-unavailable"
	// OutcomeInvalidSet: the set the entry names is at hand but is not a policy
	// set policy.NewReplay accepts (a policy does not parse, say).
	OutcomeInvalidSet Outcome = "set-invalid"
)

// Publication is whether a ledger decision's policy set was published
// before it. The names are stable.
type Publication string

const (
	// Published: an earlier entry of the export publishes the set.
	Published Publication = "published"
	// Unpublished: no earlier entry publishes it, and the export starts
	// at index 0, so none can: a failure.
	Unpublished Publication = "unpublished"
	// NotInRange: no earlier entry of the export publishes it, and the
	// export starts after index 0, so the publication may be before its
	// range: not a failure.
	NotInRange Publication = "publication-not-in-range"
)

// Difference is one member on which a replay disagrees with the entry:
// "decision", "policies" or "policy_errors", with the recorded and the
// replayed values (a decision as a one-element list). They are
// identifiers (docs/entry.md §1.1), never attribute values.
type Difference struct {
	Member   string
	Recorded []string
	Replayed []string
}

// DecisionResult is what replay found for one ledger decision.
type DecisionResult struct {
	Index       uint64
	PolicySet   commit.Digest
	Outcome     Outcome
	Differences []Difference // OutcomeDisagree
	// Problem says why the replay was refused (OutcomeRefused), or why the set
	// is invalid (OutcomeInvalidSet). It names no attribute value; for
	// OutcomeInvalidSet it may quote the set's policy text.
	Problem     string
	Publication Publication
}

// Failed reports whether the result is a failure: any outcome but OutcomeAgree,
// or a set never published.
func (r *DecisionResult) Failed() bool {
	return r.Outcome != OutcomeAgree || r.Publication == Unpublished
}

// MaxListedDecisions bounds DecisionReport.Failed, so that memory does
// not grow with an export that fails everywhere.
const MaxListedDecisions = 10000

// DecisionReport sums up the replay of an export's ledger decisions.
type DecisionReport struct {
	Export *ExportReport
	// Decisions counts the ledger decisions (version 3, kind decision);
	// Replayed those replayed (Agreed + Disagreed + Refused).
	Decisions, Replayed, Agreed, Disagreed, Refused uint64
	// Unavailable counts decisions not replayed for want of a valid set
	// (OutcomeUnavailable and OutcomeInvalidSet outcomes).
	Unavailable uint64
	// Unpublished counts decisions whose set no earlier entry publishes,
	// in an export from index 0 (failures); NotInRange those in an
	// export from a later index (not failures).
	Unpublished, NotInRange uint64
	// Mediated counts the decisions mediators made (versions 1 and 2),
	// which name no policy set and are not replayed; Publications the
	// policy-set publications.
	Mediated, Publications uint64
	// NotPublishedInRange lists the sets of the NotInRange decisions, in
	// order of first appearance.
	NotPublishedInRange []commit.Digest
	// Failed lists the failed decisions (DecisionResult.Failed) in index
	// order, at most MaxListedDecisions of them; Omitted counts the rest.
	Failed  []DecisionResult
	Omitted uint64
}

// OK reports whether every ledger decision agrees and was published.
func (r *DecisionReport) OK() bool {
	return r.Decisions == r.Agreed && r.Unpublished == 0
}

// DecisionOptions say how to verify the export and which policy sets the
// auditor holds.
type DecisionOptions struct {
	// Export are the options of the export's verification. OnEntry, if
	// set, is called as VerifyExport calls it (on the first reading).
	Export ExportOptions
	// Sets are policy sets the auditor holds (policy.NewReplay of a
	// policy directory, say), used when the export does not carry the
	// set an entry names. Each must be named by an entry of the export.
	Sets []*policy.Set
}

// UnnamedSetError: a policy set the auditor supplied is named by no entry
// of the export: most likely the wrong directory.
type UnnamedSetError struct {
	Digest commit.Digest
	// Named are the sets the export's entries name.
	Named []commit.Digest
}

func (e *UnnamedSetError) Error() string {
	return fmt.Sprintf("verify: the policy set %s is named by no entry of the export", e.Digest)
}

// VerifyDecisions verifies an export (as VerifyExport does; its failure
// is returned as is) and replays every ledger decision it holds:
// Decide, with the policy set the entry names (from the export's
// policy-set frames or opts.Sets), over the entry's principal, action and
// attributes must give exactly its decision, policies and policy_errors.
// It also checks that an earlier entry of the export published the set.
//
// Entries are not held in memory. The export's policy sets follow its
// entries, so when an entry names a set opts.Sets does not hold,
// VerifyDecisions reads r a second time from its start, verifying it
// again but for the entries' signatures, and requires the same checkpoint,
// range, root and last entry hash: the same tree, whose leaves cover the
// signatures the first reading verified, so the same entries. Parsed sets
// are cached by digest.
func VerifyDecisions(r io.ReadSeeker, key *Key, opts DecisionOptions) (*DecisionReport, error) {
	rp := &replayer{sets: map[commit.Digest]*policy.Set{}, invalid: map[commit.Digest]string{},
		report: &DecisionReport{}, notInRange: map[commit.Digest]bool{}, published: map[commit.Digest]bool{}}
	supplied := map[commit.Digest]bool{}
	for _, s := range opts.Sets {
		rp.sets[s.Digest()] = s
		supplied[s.Digest()] = true
	}
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}

	// First reading: count, and replay the decisions whose set the
	// auditor supplied.
	first := opts.Export
	first.OnEntry = func(index uint64, b []byte) {
		if opts.Export.OnEntry != nil {
			opts.Export.OnEntry(index, b)
		}
		rp.entry(index, b, func(d commit.Digest) bool { return supplied[d] }, true)
	}
	report, err := VerifyExport(r, key, first)
	if err != nil {
		return nil, err
	}
	for d := range supplied {
		if !slices.Contains(report.Named, d) {
			return nil, &UnnamedSetError{Digest: d, Named: report.Named}
		}
	}
	if rp.deferred > 0 {
		// Second reading: the decisions whose set only the export's
		// frames may carry.
		for d, files := range report.PolicySets {
			if rp.sets[d] == nil {
				s, err := policy.NewReplay(files)
				if err != nil {
					rp.invalid[d] = err.Error()
				} else {
					rp.sets[d] = s
				}
			}
		}
		if _, err := r.Seek(start, io.SeekStart); err != nil {
			return nil, err
		}
		rp.published = map[commit.Digest]bool{}
		second := opts.Export
		second.Progress = nil   // the caller's count is of one reading; a second would start again from 0
		second.rereading = true // the root comparison below proves the same entries
		second.OnEntry = func(index uint64, b []byte) {
			rp.entry(index, b, func(d commit.Digest) bool { return !supplied[d] }, false)
		}
		again, err := VerifyExport(r, key, second)
		if err != nil {
			return nil, err
		}
		if again.Start != report.Start || again.End != report.End || again.LastHash != report.LastHash ||
			again.Checkpoint.Size != report.Checkpoint.Size || !bytes.Equal(again.Checkpoint.Hash, report.Checkpoint.Hash) {
			return nil, &Failure{Index: NoIndex, Part: "export file", Check: CheckFormat,
				Err: errors.New("the file changed between its two readings")}
		}
	}
	rp.finish(report)
	return rp.report, nil
}

// replayer replays the ledger decisions of one export, entry by entry.
type replayer struct {
	sets       map[commit.Digest]*policy.Set
	invalid    map[commit.Digest]string // sets NewReplay refused, why
	published  map[commit.Digest]bool   // by an entry seen so far
	notInRange map[commit.Digest]bool
	report     *DecisionReport
	deferred   uint64
	// start is the index of the first entry: the export's start, since
	// VerifyExport calls OnEntry in index order and fails the export if
	// it skips an entry.
	start   uint64
	started bool
}

// entry handles one verified entry. replayNow says which decisions to
// replay on this reading; counting says whether this reading counts the
// entries (the first does).
func (rp *replayer) entry(index uint64, b []byte, replayNow func(commit.Digest) bool, counting bool) {
	if !rp.started {
		rp.start, rp.started = index, true
	}
	e, err := entry.Parse(b)
	if err != nil {
		return // VerifyExport reports it
	}
	rep := rp.report
	switch e.Kind {
	case "":
		if counting {
			rep.Mediated++
		}
		return
	case entry.KindPolicySet:
		if counting {
			rep.Publications++
		}
		rp.published[e.PolicySet] = true
		return
	case entry.KindDecision:
	default:
		return
	}
	if counting {
		rep.Decisions++
	}
	if !replayNow(e.PolicySet) {
		rp.deferred++
		return
	}
	res := DecisionResult{Index: index, PolicySet: e.PolicySet, Publication: Published}
	switch {
	case rp.published[e.PolicySet]:
	case rp.start == 0:
		res.Publication = Unpublished
		rep.Unpublished++
	default:
		res.Publication = NotInRange
		rep.NotInRange++
		if !rp.notInRange[e.PolicySet] {
			rp.notInRange[e.PolicySet] = true
			rep.NotPublishedInRange = append(rep.NotPublishedInRange, e.PolicySet)
		}
	}
	rp.replay(e, &res)
	switch res.Outcome {
	case OutcomeAgree:
		rep.Agreed++
	case OutcomeDisagree:
		rep.Disagreed++
	case OutcomeRefused:
		rep.Refused++
	default:
		rep.Unavailable++
	}
	if res.Failed() {
		if len(rep.Failed) < MaxListedDecisions {
			rep.Failed = append(rep.Failed, res)
		} else {
			rep.Omitted++
		}
	}
}

// replay decides e again with its set and compares.
func (rp *replayer) replay(e *entry.Entry, res *DecisionResult) {
	s := rp.sets[e.PolicySet]
	if s == nil {
		res.Outcome = OutcomeUnavailable
		if why, ok := rp.invalid[e.PolicySet]; ok {
			res.Outcome, res.Problem = OutcomeInvalidSet, why
		}
		return
	}
	got := s.Decide(e.Principal, e.Action, e.Attributes)
	if got.Invalid != nil {
		res.Outcome, res.Problem = OutcomeRefused, got.Invalid.Problem
		return
	}
	compare := func(member string, recorded, replayed []string) {
		if !slices.Equal(recorded, replayed) {
			res.Differences = append(res.Differences, Difference{Member: member,
				Recorded: slices.Clone(recorded), Replayed: slices.Clone(replayed)})
		}
	}
	compare("decision", []string{string(e.Decision)}, []string{string(got.Decision)})
	compare("policies", e.Policies, got.Determining)
	compare("policy_errors", e.PolicyErrors, got.Errored)
	res.Outcome = OutcomeAgree
	if len(res.Differences) > 0 {
		res.Outcome = OutcomeDisagree
	}
}

// finish completes the report: the export's, the replayed count, the
// failed results in index order (a second reading appends its own).
func (rp *replayer) finish(report *ExportReport) {
	rep := rp.report
	rep.Export = report
	rep.Replayed = rep.Agreed + rep.Disagreed + rep.Refused
	slices.SortFunc(rep.Failed, func(a, b DecisionResult) int { return cmp.Compare(a.Index, b.Index) })
}
