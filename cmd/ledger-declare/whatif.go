package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/verify"
)

const policyWhatifUsage = `Usage:
    ledger-declare policy whatif (--key VKEY)... --policies DIR
                                 [--catalog DIR] [--json] EXPORT

Verify the export file EXPORT as 'ledger-verify export' does (package
verify: checkpoint, signatures, chain, tree), then re-evaluate every
decision the ledger made itself (version 3 entries of kind "decision")
under the policy set in DIR, as ledgerd would decide the recorded
principal, action and attributes, and report which decisions change:
the decision, the determining policies or the erroring policies.
Decisions mediators made (versions 1 and 2) are counted, not
re-evaluated. Nothing is printed for a changed entry but its index,
action, decisions and policy ids; attribute values never are.

Options:
    --key VKEY       The ledger's note verifier key (name+hash+base64).
                     Repeatable, for a log whose key rotated. Required.
    --policies DIR   The edited policy directory (.cedar files). Required.
    --catalog DIR    Validate the set against this catalog's declarations,
                     as 'policy check' does, first; a request the schema
                     then does not admit is reported as refused. Without
                     it the set is read as a replay set (policy.NewReplay:
                     parsed and its annotations checked, no schema).
    --json           One JSON object on standard output:
                     {"origin", "start", "end", "policy_set", "decisions",
                      "changed", "unchanged", "mediated",
                      "entries": [{"index", "action",
                                   "old": {"decision", "policies", "policy_errors"},
                                   "new": {"decision", "policies", "policy_errors",
                                           "problem"}}]}

Output: a line per changed entry, then the counts.

Exit status: 0 the export verifies (whether or not decisions change), 1
it does not verify or the set is refused, 2 bad usage or unreadable input.

Examples:
    $ ledger-declare policy whatif --key "$(cat ledger.vkey)" --policies edited export.ledger
    entry 5: make_payment: needs_approval [payments.approval-above-threshold] -> deny [payments.deny-large]
    whatif: entries 0 to 47 of ledger.example.com/log under sha256:...
      45 ledger decisions re-evaluated: 1 changed, 44 unchanged
      2 decisions by mediators (not re-evaluated)
`

// verdict is a decision with its policies, old (recorded) or new.
type verdict struct {
	Decision     entry.Decision `json:"decision,omitempty"`
	Policies     []string       `json:"policies"`
	PolicyErrors []string       `json:"policy_errors"`
	Problem      string         `json:"problem,omitempty"` // the request was refused
}

func (v verdict) String() string {
	if v.Problem != "" {
		return "refused (" + v.Problem + ")"
	}
	s := fmt.Sprintf("%s %s", v.Decision, ids(v.Policies))
	if len(v.PolicyErrors) > 0 {
		s += " policy_errors " + ids(v.PolicyErrors)
	}
	return s
}

type changedEntry struct {
	Index  uint64  `json:"index"`
	Action string  `json:"action"`
	Old    verdict `json:"old"`
	New    verdict `json:"new"`
}

type whatifReport struct {
	Origin    string         `json:"origin"`
	Start     uint64         `json:"start"`
	End       uint64         `json:"end"`
	PolicySet string         `json:"policy_set"`
	Decisions int            `json:"decisions"`
	Changed   int            `json:"changed"`
	Unchanged int            `json:"unchanged"`
	Mediated  int            `json:"mediated"`
	Entries   []changedEntry `json:"entries"`
}

func policyWhatif(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("policy whatif", flag.ContinueOnError)
	var keys stringList
	fs.Var(&keys, "key", "")
	dir := fs.String("policies", "", "")
	catalogDir := fs.String("catalog", "", "")
	asJSON := fs.Bool("json", false, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return badUsage("--key VKEY is required")
	case *dir == "":
		return badUsage("--policies DIR is required")
	case len(rest) != 1:
		return badUsage("takes one export file")
	}
	key, err := verify.ParseKeys(keys...)
	if err != nil {
		return badUsage("--key: %v", err)
	}
	var set *policy.Set
	if *catalogDir != "" {
		cat, err := catalog.Load(*catalogDir)
		if err != nil {
			return fmt.Errorf("--catalog %s: %w", *catalogDir, err)
		}
		if set, err = policy.Load(*dir, cat.Declarations()); err != nil {
			return policyRefusal(*dir, err)
		}
	} else {
		files, err := policy.ReadDir(*dir)
		if err == nil {
			set, err = policy.NewReplay(files)
		}
		if err != nil {
			return policyRefusal(*dir, err)
		}
	}
	f, err := os.Open(rest[0])
	if err != nil {
		return err
	}
	defer f.Close()

	rep := whatifReport{PolicySet: set.Digest().String(), Entries: []changedEntry{}}
	var parseErr error
	opts := verify.ExportOptions{OnEntry: func(index uint64, b []byte) {
		e, err := entry.Parse(b)
		if err != nil {
			parseErr = fmt.Errorf("entry %d: %v", index, err) // VerifyExport refuses it too
			return
		}
		switch {
		case e.Kind == "": // versions 1 and 2: a mediator decided
			rep.Mediated++
			return
		case e.Kind != entry.KindDecision:
			return
		}
		rep.Decisions++
		old := verdict{Decision: e.Decision, Policies: nonNil(e.Policies), PolicyErrors: nonNil(e.PolicyErrors)}
		r := set.Decide(e.Principal, e.Action, e.Attributes)
		now := verdict{Decision: r.Decision, Policies: r.Determining, PolicyErrors: r.Errored}
		if r.Invalid != nil {
			now = verdict{Policies: []string{}, PolicyErrors: []string{}, Problem: r.Invalid.Problem}
		}
		if now.Problem == "" && now.Decision == old.Decision && slices.Equal(now.Policies, old.Policies) && slices.Equal(now.PolicyErrors, old.PolicyErrors) {
			rep.Unchanged++
			return
		}
		rep.Changed++
		rep.Entries = append(rep.Entries, changedEntry{Index: index, Action: e.Action, Old: old, New: now})
	}}
	meter := progress.New(stderr, programName+": policy whatif", "entries")
	opts.Progress = meter.Hook()
	ex, err := verify.VerifyExport(f, key, opts)
	meter.Finish()
	if err != nil {
		var fail *verify.Failure
		if errors.As(err, &fail) {
			return &refusal{msg: "the export does not verify: " + err.Error()}
		}
		return err
	}
	if parseErr != nil { // not reached: VerifyExport parses every entry
		return &refusal{msg: "the export does not verify: " + parseErr.Error()}
	}
	rep.Origin, rep.Start, rep.End = ex.Checkpoint.Origin, ex.Start, ex.End
	if *asJSON {
		termtext.WriteJSON(stdout, rep)
		return nil
	}
	for _, c := range rep.Entries {
		termtext.PrintLine(stdout, "entry %d: %s: %s -> %s", c.Index, termtext.Quote(c.Action), c.Old, c.New)
	}
	where := fmt.Sprintf("no entries (range %d to %d)", rep.Start, rep.End)
	if rep.End > rep.Start {
		where = fmt.Sprintf("entries %d to %d", rep.Start, rep.End-1)
	}
	termtext.PrintLine(stdout, "whatif: %s of %s under %s", where, termtext.Quote(rep.Origin), rep.PolicySet)
	termtext.PrintLine(stdout, "  %s re-evaluated: %d changed, %d unchanged",
		termtext.Count(rep.Decisions, "ledger decision", "ledger decisions"), rep.Changed, rep.Unchanged)
	termtext.PrintLine(stdout, "  %s (not re-evaluated)", termtext.Count(rep.Mediated, "decision by mediators", "decisions by mediators"))
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }
