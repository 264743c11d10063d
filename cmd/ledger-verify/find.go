package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/termtext"
)

const findUsage = `Usage:
    ledger-verify find (--key VKEY | --key-file FILE | --trust FILE)...
                       [--principal NAME] [--action NAME]
                       [--decision DECISION] [--policy ID]
                       [--since TIME] [--until TIME]
                       [--params-digest DIGEST] [--approval ID] [--kind KIND]
                       [--trusted CHECKPOINT] [--prev HASH] [--all]
                       [--write-checkpoint FILE] [--json] EXPORT

Verify the export file EXPORT, as the export command does, then list the
entries that match every filter given (every entry, with none). Nothing
is printed before the whole export has verified: an export that does not
verify lists no entry.

Filters (each at most once; values are compared exactly, byte for byte):
    --principal NAME      The entry's principal.
    --action NAME         The entry's action.
    --decision DECISION   The entry's decision: allow, deny or
                          needs_approval (decisions of every version).
    --policy ID           A determining policy: ID is one of the entry's
                          policies.
    --since TIME          Entries whose time is TIME or later (RFC 3339,
                          e.g. 2026-12-01T09:00:00Z).
    --until TIME          Entries whose time is before TIME (RFC 3339):
                          --since and --until make a half-open interval, so
                          that consecutive windows share no entry.
    --params-digest DIGEST
                          The entry's parameter commitment, in either
                          spelling: sha256:<hex> (version 1) or
                          v2:sha256:<hex> (the hiding commitment,
                          docs/commitment.md §7); each matches only its
                          own spelling. Requests and consumptions carry one.
    --approval ID         The entries of one approval's lifecycle
                          (docs/approvals.md): the request, whose entry hash
                          ID (sha256:<hex>) is, and the verdict,
                          consumption and outcomes that name it.
    --kind KIND           The entry's kind: decision (a decision of any
                          version, 1 to 3: mediators' have no kind
                          member), policy_set, approval_config, approval,
                          consumption or outcome (of an approval, version
                          4, or of an allowed act, version 5).

Options:
` + exportOptions + `
Output: a table of the matching entries, one line each: index, time,
kind/version, principal, action, decision, determining policies ("-"
for a member the entry does not have), then a summary line. Identifiers
are printed escaped; parameters and attributes never are. With --json,
one line per matching entry: {"index": N, "entry": {...the entry's JSON
object, its characters that are not printable written as JSON
escapes...}}, and nothing else on standard output (an export that does
not verify gives the export command's {"result": "failed", ...}).
Matching entries are held in memory until the export has verified.

Exit status: 0 at least one entry matches, 1 the export does not verify
(the failures are reported) or no entry matches ("no match:" on standard
error), 2 bad usage or unreadable input.

Examples:
    $ ledger-verify find --key-file ledger.vkey --decision needs_approval export.ledger
    INDEX  TIME                         KIND/VERSION  PRINCIPAL  ACTION        DECISION        POLICIES
    1      2026-12-01T09:00:01.000000Z  decision/1    agent-1    make_payment  needs_approval  payments.review
    found: 1 of entries 0 to 15 (16 entries) of ledger.example.com/log
    $ ledger-verify find --key-file ledger.vkey --approval sha256:... --json export.ledger
    {"entry":{...},"index":1}
    ...
`

// onceString is a string flag that may be given once, not empty.
type onceString struct {
	value string
	set   bool
}

func (o *onceString) String() string { return o.value }
func (o *onceString) Set(s string) error {
	switch {
	case o.set:
		return fmt.Errorf("given twice: each filter is given at most once")
	case s == "":
		return fmt.Errorf("empty")
	}
	o.value, o.set = s, true
	return nil
}

// findKinds are the values of --kind.
var findKinds = []string{"decision", "policy_set", "approval_config", "approval", "consumption", "outcome"}

// filter is the parsed filters of find; a zero member matches every entry.
type filter struct {
	principal, action, policy, kind string
	decision                        entry.Decision
	since, until                    *time.Time
	params                          *commit.Commitment // Digest and Hiding only
	approval                        *commit.Digest
}

// parseFilter checks the filter flags; an error names the flag.
func parseFilter(principal, action, decision, policy, since, until, params, approval, kind onceString) (*filter, error) {
	f := &filter{principal: principal.value, action: action.value, policy: policy.value}
	if decision.set {
		switch d := entry.Decision(decision.value); d {
		case entry.Allow, entry.Deny, entry.NeedsApproval:
			f.decision = d
		default:
			return nil, fmt.Errorf("--decision %q: want allow, deny or needs_approval", decision.value)
		}
	}
	if kind.set {
		if !slices.Contains(findKinds, kind.value) {
			return nil, fmt.Errorf("--kind %q: want one of %s", kind.value, strings.Join(findKinds, ", "))
		}
		f.kind = kind.value
	}
	for _, t := range []struct {
		name string
		o    onceString
		to   **time.Time
	}{{"since", since, &f.since}, {"until", until, &f.until}} {
		if !t.o.set {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.o.value)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: not an RFC 3339 time (e.g. 2026-12-01T09:00:00Z)", t.name, t.o.value)
		}
		*t.to = &v
	}
	if f.since != nil && f.until != nil && !f.since.Before(*f.until) {
		return nil, fmt.Errorf("--since must be before --until: the interval [since, until) would be empty")
	}
	if params.set {
		d, hiding, err := commit.ParseParamsDigest(params.value)
		if err != nil {
			return nil, fmt.Errorf("--params-digest: want sha256:<64 hex digits> or v2:sha256:<64 hex digits>")
		}
		f.params = &commit.Commitment{Digest: d, Hiding: hiding}
	}
	if approval.set {
		d, err := commit.ParseDigest(approval.value)
		if err != nil {
			return nil, fmt.Errorf("--approval: want the request's entry hash, sha256:<64 hex digits>")
		}
		f.approval = &d
	}
	return f, nil
}

// kindOf is an entry's kind as find names it: "decision" for the
// decisions of versions 1 and 2, which have no kind member.
func kindOf(e *entry.Entry) string {
	if e.Kind == "" {
		return string(entry.KindDecision)
	}
	return string(e.Kind)
}

// isDecision reports whether e records a decision (versions 1 to 3).
func isDecision(e *entry.Entry) bool { return e.Kind == "" || e.Kind == entry.KindDecision }

// match reports whether the entry e, whose entry hash is hash, passes
// every filter.
func (f *filter) match(e *entry.Entry, hash commit.Digest) bool {
	switch {
	case f.principal != "" && e.Principal != f.principal,
		f.action != "" && e.Action != f.action,
		f.decision != "" && (!isDecision(e) || e.Decision != f.decision),
		f.policy != "" && !slices.Contains(e.Policies, f.policy),
		f.kind != "" && kindOf(e) != f.kind,
		f.since != nil && e.Time.Before(*f.since),
		f.until != nil && !e.Time.Before(*f.until):
		return false
	}
	if f.params != nil {
		if !hasParams(e) || e.Params.Hiding != f.params.Hiding || e.Params.Digest != f.params.Digest {
			return false
		}
	}
	if f.approval != nil {
		request := isDecision(e) && e.Decision == entry.NeedsApproval && hash == *f.approval
		// A version 4 verdict, consumption or outcome names its approval;
		// an approval_config and a version 5 outcome name none (a zero
		// ApprovalID, which no request's hash is).
		named := e.Version() == entry.Version4 && e.Kind != entry.KindApprovalConfig && e.ApprovalID == *f.approval
		if !request && !named {
			return false
		}
	}
	return true
}

// hasParams reports whether e carries a parameter commitment: a
// decision or a consumption.
func hasParams(e *entry.Entry) bool { return isDecision(e) || e.Kind == entry.KindConsumption }

// found is one matching entry, kept until the export has verified.
type found struct {
	index uint64
	e     *entry.Entry
	b     []byte
}

func runFind(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("find", flag.ContinueOnError)
	var r exportRun
	r.register(fs)
	var principal, action, decision, policy, since, until, params, approval, kind onceString
	fs.Var(&principal, "principal", "")
	fs.Var(&action, "action", "")
	fs.Var(&decision, "decision", "")
	fs.Var(&policy, "policy", "")
	fs.Var(&since, "since", "")
	fs.Var(&until, "until", "")
	fs.Var(&params, "params-digest", "")
	fs.Var(&approval, "approval", "")
	fs.Var(&kind, "kind", "")
	files, code, ok := parseFlags(fs, findUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "find", "takes exactly one export file")
	}
	f, err := parseFilter(principal, action, decision, policy, since, until, params, approval, kind)
	if err != nil {
		return usageError(stderr, "find", "%v", err)
	}
	var matches []found
	report, verr, uerr := r.verifyParsed(files[0], stderr, func(i uint64, e *entry.Entry, h commit.Digest, b []byte) {
		if f.match(e, h) {
			matches = append(matches, found{i, e, b})
		}
	})
	if uerr != nil {
		return inputError(stderr, "find", uerr)
	}
	if verr != nil {
		return reportFailures(stdout, stderr, verr, r.json)
	}
	if code, ok := r.writeCheckpoint("find", report, stderr); !ok {
		return code
	}
	n := report.End - report.Start
	where := fmt.Sprintf("no entries (range %d to %d)", report.Start, report.End)
	if n > 0 {
		where = fmt.Sprintf("entries %d to %d (%s)", report.Start, report.End-1, termtext.Count(n, "entry", "entries"))
	}
	origin := termtext.Quote(report.Checkpoint.Origin)
	if len(matches) == 0 {
		errorf(stderr, "find: no match: the export verifies, and none of its %s of %s matches the filters", where, origin)
		return exitFailed
	}
	if r.json {
		for _, m := range matches {
			termtext.WriteJSON(stdout, map[string]any{"index": m.index, "entry": json.RawMessage(m.b)})
		}
		return exitOK
	}
	printFound(stdout, matches)
	termtext.PrintLine(stdout, "found: %d of %s of %s", len(matches), where, origin)
	return exitOK
}

// printFound writes the table of matches, every cell escaped.
func printFound(w io.Writer, matches []found) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tTIME\tKIND/VERSION\tPRINCIPAL\tACTION\tDECISION\tPOLICIES")
	cell := func(s string) string {
		if s == "" {
			return "-"
		}
		return termtext.Escape(s)
	}
	for _, m := range matches {
		e := m.e
		policies := make([]string, len(e.Policies))
		for i, p := range e.Policies {
			policies[i] = termtext.Escape(p)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s/%d\t%s\t%s\t%s\t%s\n", m.index, e.Time.UTC().Format(entry.TimeLayout),
			kindOf(e), e.Version(), cell(e.Principal), cell(e.Action), cell(string(e.Decision)), cell(strings.Join(policies, ",")))
	}
	tw.Flush()
}
