package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/verify"
)

const decisionsUsage = `Usage:
    ledger-verify decisions (--key VKEY | --key-file FILE | --trust FILE)...
                            [--policies DIR]...
                            [--trusted CHECKPOINT] [--prev HASH] [--all]
                            [--write-checkpoint FILE] [--json] EXPORT

Verify the export file EXPORT, as the export command does, then replay
every decision the ledger made itself (version 3 entries of kind
"decision"): evaluate the policy set the entry names over its principal,
action and attributes, and require exactly the recorded decision,
determining policies and policy_errors (docs/policies.md). Each set comes
from the export's policy-set frames or from a --policies directory, whose
set is identified by its digest. Each decision's set must be published by
an earlier entry of the export when the export starts at index 0; when it
starts later, the publication may be before its range, which is reported,
not a failure. Decisions mediators made (versions 1 and 2) name no policy
set: they are counted, not replayed.

Options:
    --policies DIR        A policy directory (.cedar files) holding a set
                          an entry names; repeat for several sets. Its
                          digest must be one an entry of the export names.
` + exportOptions + `
Output: a line per failed decision, naming its entry index and what
differs, then a summary. Policy ids and decisions are printed, escaped;
attribute values never are. With --json, one object:
    {"result": "agree" | "disagree", "origin", "tree_size", "start", "end",
     "decisions", "replayed", "agreed", "disagreed", "refused",
     "unavailable", "unpublished", "publication_not_in_range",
     "mediated", "publications",
     "not_published_in_range": [policy-set digest, ...],
     "failed": [{"index", "policy_set", "outcome", "publication",
                 "differences": [{"member", "recorded": [...],
                                  "replayed": [...]}],
                 "problem"}],
     "omitted"}
"outcome" is "agree", "disagree", "replay-refused", "set-unavailable" or
"set-invalid"; "publication" is "published", "unpublished" or
"publication-not-in-range"; "member" is "decision", "policies" or
"policy_errors". "failed" lists at most 10000 decisions, "omitted" counts
the others. An export that does not verify gives the export command's
{"result": "failed", "failures": [...]}.

Exit status: 0 every ledger decision agrees (and was published, when the
export starts at index 0), 1 the export does not verify or a decision
disagrees, is refused, has no set, or was not published, 2 bad usage or
unreadable input (a --policies directory whose set no entry names).

Examples:
    $ ledger-verify decisions --key-file ledger.vkey export.ledger
    agree: entries 0 to 47 of ledger.example.com/log: every ledger decision replays to its record
      45 ledger decisions: 45 replayed, 45 agreed, 0 disagreed, 0 refused, 0 unavailable
      2 decisions by mediators (not replayable), 1 policy-set publication
    $ ledger-verify decisions --key-file ledger.vkey --policies policies/ tail.ledger
    entry 8: disagree: decision: recorded allow, replayed deny
    disagree: entries 2 to 47 of ledger.example.com/log: 1 ledger decision does not replay to its record
      ...
`

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// runDecisions verifies an export, then replays its ledger decisions.
func runDecisions(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decisions", flag.ContinueOnError)
	var r exportRun
	r.register(fs)
	var dirs stringList
	fs.Var(&dirs, "policies", "")
	files, code, ok := parseFlags(fs, decisionsUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "decisions", "takes exactly one export file")
	}
	var sets []*policy.Set
	dirOf := map[commit.Digest]string{}
	for _, dir := range dirs {
		s, err := loadReplayDir(dir)
		if err != nil {
			return inputError(stderr, "decisions", fmt.Errorf("--policies %s: %w", termtext.Quote(dir), err))
		}
		sets = append(sets, s)
		dirOf[s.Digest()] = dir
	}
	key, opts, err := r.options(stderr)
	if err != nil {
		return inputError(stderr, "decisions", err)
	}
	f, _, err := openExport(files[0])
	if err != nil {
		return inputError(stderr, "decisions", err)
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return inputError(stderr, "decisions", err)
	}
	meter := r.meter(stderr, &opts)
	rep, err := verify.VerifyDecisions(f, key, verify.DecisionOptions{Export: opts, Sets: sets})
	meter.Finish()
	var ue *verify.UnnamedSetError
	switch {
	case errors.As(err, &ue):
		errorf(stderr, "decisions: --policies %s: its policy set %s is named by no entry of the export", termtext.Quote(dirOf[ue.Digest]), ue.Digest)
		named := make([]string, len(ue.Named))
		for i, d := range ue.Named {
			named[i] = d.String()
		}
		if len(named) == 0 {
			hintf(stderr, "the export holds no ledger decision or publication: it names no policy set")
		} else {
			hintf(stderr, "the export's entries name %s: give the directory of one of them", strings.Join(named, ", "))
		}
		return exitUsage
	case err != nil && isFailure(err):
		return reportFailures(stdout, stderr, err, r.json)
	case err != nil:
		return inputError(stderr, "decisions", err)
	}
	if code, ok := r.writeCheckpoint("decisions", rep.Export, stderr); !ok {
		return code
	}
	if r.json {
		writeDecisionsJSON(stdout, rep)
	} else {
		printDecisions(stdout, rep)
	}
	if rep.Unavailable > 0 && !r.json {
		hintf(stderr, "give a set the export does not carry with --policies DIR, a directory of its .cedar files")
	}
	if !rep.OK() {
		return exitFailed
	}
	return exitOK
}

// isFailure reports whether err is a verification failure (every one
// of a joined error is a *verify.Failure), not a problem of reading.
func isFailure(err error) bool {
	for _, e := range failureList(err) {
		var f *verify.Failure
		if !errors.As(e, &f) {
			return false
		}
	}
	return true
}

// loadReplayDir reads the policy directory dir as policy.Load does (every
// regular file whose name ends in ".cedar"; a subdirectory or a ".cedar"
// entry that is not a regular file refused) and builds a replay set.
func loadReplayDir(dir string) (*policy.Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []policy.File
	total := 0
	for _, de := range entries {
		name := de.Name()
		switch {
		case de.IsDir():
			return nil, fmt.Errorf("%s: subdirectories are refused in a policy directory", termtext.Quote(name))
		case !strings.HasSuffix(name, ".cedar"):
			continue
		case !de.Type().IsRegular():
			return nil, fmt.Errorf("%s: not a regular file", termtext.Quote(name))
		}
		b, err := keyflag.ReadFileLimit(filepath.Join(dir, name), policy.MaxFileBytes)
		if err != nil {
			return nil, err
		}
		if total += len(b); total > policy.MaxSetBytes || len(files) == policy.MaxFiles {
			return nil, fmt.Errorf("more than %d bytes or %d files of policies", policy.MaxSetBytes, policy.MaxFiles)
		}
		files = append(files, policy.File{Name: name, Bytes: b})
	}
	if len(files) == 0 {
		return nil, errors.New("no .cedar file in the directory")
	}
	return policy.NewReplay(files)
}

// ids quotes a list of identifiers for a terminal.
func ids(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = termtext.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func printDecisions(w io.Writer, rep *verify.DecisionReport) {
	for _, f := range rep.Failed {
		switch f.Outcome {
		case verify.OutcomeDisagree:
			for _, d := range f.Differences {
				if d.Member == "decision" {
					termtext.PrintLine(w, "entry %d: disagree: decision: recorded %s, replayed %s", f.Index, termtext.Quote(d.Recorded[0]), termtext.Quote(d.Replayed[0]))
				} else {
					termtext.PrintLine(w, "entry %d: disagree: %s: recorded %s, replayed %s", f.Index, d.Member, ids(d.Recorded), ids(d.Replayed))
				}
			}
		case verify.OutcomeRefused:
			termtext.PrintLine(w, "entry %d: replay refused: the policy set %s refuses the recorded attributes: %s", f.Index, f.PolicySet, f.Problem)
		case verify.OutcomeUnavailable:
			termtext.PrintLine(w, "entry %d: set unavailable: the policy set %s is neither in the export nor given with --policies", f.Index, f.PolicySet)
		case verify.OutcomeInvalidSet:
			termtext.PrintLine(w, "entry %d: set invalid: the policy set %s does not load: %s", f.Index, f.PolicySet, f.Problem)
		}
		if f.Publication == verify.Unpublished {
			termtext.PrintLine(w, "entry %d: unpublished: no earlier entry publishes the policy set %s, and the export starts at index 0", f.Index, f.PolicySet)
		}
	}
	if rep.Omitted > 0 {
		termtext.PrintLine(w, "... and %s not listed", termtext.Count(rep.Omitted, "more failed decision", "more failed decisions"))
	}
	ex := rep.Export
	where := fmt.Sprintf("no entries (range %d to %d)", ex.Start, ex.End)
	if ex.End > ex.Start {
		where = fmt.Sprintf("entries %d to %d", ex.Start, ex.End-1)
	}
	origin := termtext.Quote(ex.Checkpoint.Origin)
	if rep.OK() {
		termtext.PrintLine(w, "agree: %s of %s: every ledger decision replays to its record", where, origin)
	} else {
		failed := uint64(len(rep.Failed)) + rep.Omitted
		termtext.PrintLine(w, "disagree: %s of %s: %s", where, origin, termtext.Count(failed, "ledger decision fails its replay", "ledger decisions fail their replay"))
	}
	termtext.PrintLine(w, "  %s: %d replayed, %d agreed, %d disagreed, %d refused, %d unavailable",
		termtext.Count(rep.Decisions, "ledger decision", "ledger decisions"), rep.Replayed, rep.Agreed, rep.Disagreed, rep.Refused, rep.Unavailable)
	termtext.PrintLine(w, "  %s (not replayable), %s",
		termtext.Count(rep.Mediated, "decision by mediators", "decisions by mediators"), termtext.Count(rep.Publications, "policy-set publication", "policy-set publications"))
	if rep.Unpublished > 0 {
		termtext.PrintLine(w, "  %s", termtext.Count(rep.Unpublished, "decision whose policy set was not published before it", "decisions whose policy set was not published before them"))
	}
	for _, d := range rep.NotPublishedInRange {
		termtext.PrintLine(w, "  publication not in range: %s (the export starts at index %d)", d, ex.Start)
	}
}

func writeDecisionsJSON(w io.Writer, rep *verify.DecisionReport) {
	type difference struct {
		Member   string   `json:"member"`
		Recorded []string `json:"recorded"`
		Replayed []string `json:"replayed"`
	}
	type result struct {
		Index       uint64             `json:"index"`
		PolicySet   commit.Digest      `json:"policy_set"`
		Outcome     verify.Outcome     `json:"outcome"`
		Publication verify.Publication `json:"publication"`
		Differences []difference       `json:"differences"`
		Problem     string             `json:"problem,omitempty"`
	}
	failed := []result{}
	for _, f := range rep.Failed {
		r := result{Index: f.Index, PolicySet: f.PolicySet, Outcome: f.Outcome, Publication: f.Publication,
			Differences: []difference{}, Problem: f.Problem}
		for _, d := range f.Differences {
			r.Differences = append(r.Differences, difference{d.Member, nonNil(d.Recorded), nonNil(d.Replayed)})
		}
		failed = append(failed, r)
	}
	notInRange := rep.NotPublishedInRange
	if notInRange == nil {
		notInRange = []commit.Digest{}
	}
	ex := rep.Export
	termtext.WriteJSON(w, map[string]any{
		"result": map[bool]string{true: "agree", false: "disagree"}[rep.OK()],
		"origin": ex.Checkpoint.Origin, "tree_size": ex.Checkpoint.Size, "start": ex.Start, "end": ex.End,
		"decisions": rep.Decisions, "replayed": rep.Replayed, "agreed": rep.Agreed, "disagreed": rep.Disagreed,
		"refused": rep.Refused, "unavailable": rep.Unavailable, "unpublished": rep.Unpublished,
		"publication_not_in_range": rep.NotInRange, "mediated": rep.Mediated, "publications": rep.Publications,
		"not_published_in_range": notInRange, "failed": failed, "omitted": rep.Omitted,
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
