package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
)

const discloseUsage = `Usage:
    ledger-verify disclose (--key VKEY | --key-file FILE | --trust FILE)...
                           --export EXPORT --index N [--declaration FILE]
                           [--allowlists FILE] [--allow-non-integer]
                           [--write-checkpoint FILE] [--json] DISCLOSURE

Verify the export file EXPORT, as the export command does, then check the
disclosure file DISCLOSURE (docs/commitment.md §7.4) against entry N's
hiding commitment: every disclosed value with its opening must be the one
committed. Fields without an opening stay hidden; they are named.

With --declaration (the action's declaration, as ledgerd serves it at
/v1/actions/{action}), each disclosed field's attribute is recomputed
from its value and compared with the one the entry records: a policy
field's value, a derived field's projections, nothing for a payload
field. So an auditor checks that a derived attribute was computed
honestly from the value it came from. The declaration must be the one
the entry was minimized under (its applied-tiers digest).

Options:
    --export EXPORT       The export file holding the entry.
    --index N             The entry's index.
    --declaration FILE    The action's declaration: recompute attributes.
    --allowlists FILE     payee_known's lists, a JSON object of name to
                          array of strings (ledger-mcp's "allowlists");
                          without it payee_known is not checked.
    --allow-non-integer   The deployment admits non-integer numbers.
` + exportOptions + `
Exit status: 0 the disclosure opens the entry's commitment and every
recomputed attribute agrees, 1 the export does not verify, the disclosure
is refused or an attribute differs, 2 bad usage or unreadable input.

Examples:
    $ ledger-verify disclose --key-file ledger.vkey --export export.ledger --index 4 \
          --declaration make_payment.json payee.disclosure
    disclosed: entry 4 opens 1 of 4 fields (hidden: amount_minor, currency, memo)
      payee         derived   payee_known: recorded and recomputed agree
`

// fieldCheck is what disclose found for one field.
type fieldCheck struct {
	Name    string `json:"name"`
	Tier    string `json:"tier,omitempty"`
	Status  string `json:"status"` // agrees, differs, hidden, unchecked, not_compared
	Problem string `json:"problem,omitempty"`
}

func runDisclose(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("disclose", flag.ContinueOnError)
	var r exportRun
	r.register(fs)
	exportFile := fs.String("export", "", "")
	indexText := fs.String("index", "", "")
	declFile := fs.String("declaration", "", "")
	allowFile := fs.String("allowlists", "", "")
	allowNonInteger := fs.Bool("allow-non-integer", false, "")
	files, code, ok := parseFlags(fs, discloseUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 || *exportFile == "" || *indexText == "" {
		return usageError(stderr, "disclose", "needs --export, --index and exactly one disclosure file")
	}
	index, err := strconv.ParseUint(*indexText, 10, 64)
	if err != nil {
		return usageError(stderr, "disclose", "--index %q is not an entry index", *indexText)
	}
	domain := commit.Domain{AllowNonInteger: *allowNonInteger}
	data, err := keyflag.ReadFileLimit(files[0], 8*commit.DefaultMaxBytes)
	if err != nil {
		return inputError(stderr, "disclose", err)
	}
	var decl *declare.Declaration
	if *declFile != "" {
		b, err := keyflag.ReadFileLimit(*declFile, 1<<20)
		if err == nil {
			err = checkLedgerdAnswer(*declFile, b)
		}
		if err != nil {
			return inputError(stderr, "disclose", err)
		}
		if decl, err = declare.Parse(b); err != nil {
			errorf(stderr, "disclose: the declaration is refused: %v", err)
			return exitFailed
		}
	}
	opts := declare.Options{Domain: domain}
	checkAllowlists := false
	if *allowFile != "" {
		b, err := keyflag.ReadFileLimit(*allowFile, 16<<20)
		if err != nil {
			return inputError(stderr, "disclose", err)
		}
		var lists map[string][]string
		if err := json.Unmarshal(b, &lists); err != nil {
			errorf(stderr, "disclose: %s: not a JSON object of name to array of strings: %v", termtext.Quote(*allowFile), err)
			return exitUsage
		}
		opts.Allowlists = map[string]map[string]bool{}
		for name, list := range lists {
			set := map[string]bool{}
			for _, s := range list {
				set[s] = true
			}
			opts.Allowlists[name] = set
		}
		checkAllowlists = true
	}
	e, code := r.verifiedEntry("disclose", *exportFile, index, stdout, stderr)
	if e == nil {
		return code
	}

	out := map[string]any{"index": index, "params_digest": e.Params.DigestText()}
	refuse := func(err error) int {
		var de *commit.DisclosureError
		if !errors.As(err, &de) {
			errorf(stderr, "disclose: %v", err)
			return exitFailed
		}
		if r.json {
			out["result"] = "refused"
			ref := map[string]any{"code": string(de.Kind), "pointer": de.Pointer}
			if de.Field != "" {
				ref["field"] = de.Field
			}
			out["refusal"] = ref
			termtext.WriteJSON(stdout, out)
		} else {
			termtext.PrintLine(stdout, "refused: %s", discloseProblem(index, de))
		}
		return exitFailed
	}
	x, err := commit.ParseDisclosure(data, domain)
	if err != nil {
		return refuse(err)
	}
	if err := x.Check(e.Params); err != nil {
		return refuse(err)
	}

	checks, declProblem := compareAttributes(e, x, decl, opts, checkAllowlists)
	failed := declProblem != ""
	for _, c := range checks {
		failed = failed || c.Status == "differs"
	}
	disclosed, hidden := x.Disclosed(), x.Hidden()
	if r.json {
		out["result"] = "valid"
		if failed {
			out["result"] = "attributes_differ"
		}
		out["disclosed"], out["hidden"] = disclosed, hidden
		if decl != nil {
			out["fields"] = checks
			if declProblem != "" {
				out["declaration_problem"] = declProblem
			}
		}
		termtext.WriteJSON(stdout, out)
	} else {
		line := fmt.Sprintf("disclosed: entry %d opens %d of %d fields", index, len(disclosed), len(disclosed)+len(hidden))
		if len(hidden) > 0 {
			line += " (hidden: " + strings.Join(quoteAll(hidden), ", ") + ")"
		}
		termtext.PrintLine(stdout, "%s", line)
		if declProblem != "" {
			termtext.PrintLine(stdout, "declaration: %s; no attribute compared", declProblem)
		}
		for _, c := range checks {
			if c.Status == "hidden" {
				continue
			}
			termtext.PrintLine(stdout, "  %-13s %-9s %s", termtext.Quote(c.Name), c.Tier, c.Problem)
		}
	}
	if failed {
		return exitFailed
	}
	return exitOK
}

// compareAttributes recomputes each disclosed field's attribute under the
// declaration and compares it with the entry's. It first holds the
// declaration to the entry's applied-tiers digest (and action definition,
// for a version 2 entry): compared under another declaration, agreement
// would mean nothing.
func compareAttributes(e *entry.Entry, x *commit.Disclosure, d *declare.Declaration, opts declare.Options, checkAllowlists bool) ([]fieldCheck, string) {
	if d == nil {
		return nil, ""
	}
	if e.Action != d.Action {
		return nil, fmt.Sprintf("the entry's action is not %s", termtext.Quote(d.Action))
	}
	if tiers, err := d.TiersDigest(); err != nil || !e.Tiers.Equal(tiers) {
		return nil, "the entry was not minimized under this declaration (its tiers_digest differs)"
	}
	if e.Version() == entry.Version2 {
		if def, err := d.Digest(); err != nil || !e.Definition.Equal(def) {
			return nil, "the entry names another action definition (its definition_digest differs)"
		}
	}
	recorded, err := (commit.Domain{AllowNonInteger: opts.Domain.AllowNonInteger}).Object(e.Attributes)
	if err != nil {
		return nil, "the entry's attributes are not an object"
	}
	var checks []fieldCheck
	for _, name := range x.Fields() {
		c := fieldCheck{Name: name}
		f, declared := d.Field(name)
		if declared {
			c.Tier = string(f.Tier)
		}
		rec, isRecorded := recorded.Get(name)
		value, disclosed := x.Value(name)
		switch {
		case !disclosed:
			c.Status, c.Problem = "hidden", "not disclosed"
		case !declared:
			c.Status, c.Problem = "agrees", "undeclared: nothing recorded"
			if isRecorded {
				c.Status, c.Problem = "differs", "undeclared, yet the entry records an attribute for it"
			}
		case !checkAllowlists && slices.Contains(f.Projections, "payee_known"):
			c.Status, c.Problem = "unchecked", "payee_known needs the allowlist "+termtext.Quote(f.Allowlist)+" (--allowlists)"
		default:
			attr, crosses, err := d.FieldAttribute(name, value, opts)
			switch {
			case err != nil:
				c.Status, c.Problem = "differs", "the disclosed value gives no attribute: "+err.Error()
			case !crosses && isRecorded:
				c.Status, c.Problem = "differs", "a payload field, yet the entry records an attribute for it"
			case !crosses:
				c.Status, c.Problem = "agrees", "payload: nothing recorded"
			case !isRecorded:
				c.Status, c.Problem = "differs", "the entry records no attribute for it"
			case !bytes.Equal(attr, rec.Canonical()):
				c.Status, c.Problem = "differs", describeDifference(f, attr, rec.Canonical())
			default:
				c.Status, c.Problem = "agrees", "recorded and recomputed agree"
				if len(f.Projections) > 0 {
					c.Problem = strings.Join(f.Projections, ", ") + ": recorded and recomputed agree"
				}
			}
		}
		checks = append(checks, c)
	}
	return checks, ""
}

// describeDifference names the projections whose recorded value differs
// from the recomputed one (values are minimized attributes, which the
// tiers let cross, so they may be shown).
func describeDifference(f declare.Field, recomputed, recorded []byte) string {
	if len(f.Projections) == 0 {
		return fmt.Sprintf("recorded %s, the disclosed value is %s", recorded, recomputed)
	}
	var a, b map[string]json.RawMessage
	json.Unmarshal(recomputed, &a)
	json.Unmarshal(recorded, &b)
	var parts []string
	for _, p := range f.Projections {
		if !bytes.Equal(a[p], b[p]) {
			parts = append(parts, fmt.Sprintf("%s recorded %s, recomputed %s", p, orNothing(b[p]), orNothing(a[p])))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("recorded %s, recomputed %s", recorded, recomputed)
	}
	return strings.Join(parts, "; ")
}

func orNothing(b json.RawMessage) string {
	if b == nil {
		return "nothing"
	}
	return string(b)
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = termtext.Quote(n)
	}
	return out
}

// discloseProblem says in words why a disclosure does not open entry
// index's commitment.
func discloseProblem(index uint64, de *commit.DisclosureError) string {
	switch de.Kind {
	case commit.ErrNotHiding:
		return fmt.Sprintf("entry %d carries a version 1 digest, which has no openings: check it with the raw parameters (ledger-verify params)", index)
	case commit.ErrCommitmentMismatch:
		return fmt.Sprintf("the disclosure's field commitments do not give entry %d's params_digest: it discloses other parameters (another entry's?)", index)
	case commit.ErrFieldMismatch:
		return fmt.Sprintf("field %s: the disclosed value and opening are not the ones entry %d committed to", termtext.Quote(de.Field), index)
	}
	return "the disclosure file: " + de.Error()
}
