package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/policy"
)

const policyTestUsage = `Usage:
    ledger-declare policy test DIR --catalog DIR TESTFILE...

Run the example calls of each TESTFILE against the policy directory DIR,
offline, as ledgerd decides them: the set is loaded as 'policy check' does;
a call given by its raw parameters is minimized with its action's
declaration in the catalog (and the file's allowlists), one given by its
minimized attributes is checked against the catalog as ledgerd checks an
append; then policy.Set.Decide gives the decision and the determining
policy ids. A test file is JSON (docs/policies.md §12.2):

    {"allowlists": {"payees": ["payee-0001"]},
     "cases": [
       {"name": "small payment", "principal": "agent-1",
        "action": "make_payment",
        "params": {"amount_minor": 5000, "currency": "EUR", "payee": "payee-0001"},
        "decision": "allow", "policies": ["payments.allow-known-payee"]},
       {"name": "large body", "principal": "agent-1", "action": "send_email",
        "attributes": {"attachment_hashes": [], "body": {"byte_size": 2000000},
                       "recipient": {"recipient_domain": "example.com"}},
        "decision": "deny", "policies": ["email.deny-large-body"]}]}

Each case has exactly one of "params" and "attributes"; "policies" are the
expected determining ids ([] for none), "policy_errors" the expected
erroring ids when given.

Options:
    --catalog DIR    The action catalog (catalog_dir). Required.

Output: a line per failing case (file, case name, expected and actual
decision and policies), then a line per file with its counts. Attribute
values are never printed.

Exit status: 0 every case passes, 1 a case fails or the set is refused, 2
bad usage or an unreadable or malformed catalog, directory or test file.

Examples:
    $ ledger-declare policy test policies --catalog decl tests/payments.json
    ok: tests/payments.json: 10 cases passed
    $ ledger-declare policy test policies --catalog decl tests/payments.json
    FAIL: tests/payments.json: case "zero amount": expected deny [payments.deny-non-positive], got allow [payments.allow-known-payee]
    FAIL: tests/payments.json: 9 of 10 cases passed, 1 failed
`

// maxTestFile bounds a test file.
const maxTestFile = 64 << 20

// testFile is the test file format (docs/policies.md §12.2).
type testFile struct {
	Allowlists map[string][]string `json:"allowlists"`
	Cases      []testCase          `json:"cases"`
}

type testCase struct {
	Name         string          `json:"name"`
	Principal    string          `json:"principal"`
	Action       string          `json:"action"`
	Params       json.RawMessage `json:"params"`
	Attributes   json.RawMessage `json:"attributes"`
	Decision     entry.Decision  `json:"decision"`
	Policies     []string        `json:"policies"`
	PolicyErrors []string        `json:"policy_errors"`
}

// parseTestFile reads a test file strictly: no unknown member, every
// case complete; an error names the JSON pointer.
func parseTestFile(data []byte) (*testFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tf testFile
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("not a test file (docs/policies.md §12.2): %v", err)
	}
	if dec.More() {
		return nil, errors.New("not a test file: data after the object")
	}
	if tf.Cases == nil {
		return nil, errors.New("/cases: missing")
	}
	names := map[string]int{}
	for i, c := range tf.Cases {
		at := fmt.Sprintf("/cases/%d", i)
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%s/name: missing", at)
		case c.Principal == "":
			return nil, fmt.Errorf("%s/principal: missing", at)
		case c.Action == "":
			return nil, fmt.Errorf("%s/action: missing", at)
		case (c.Params == nil) == (c.Attributes == nil):
			return nil, fmt.Errorf("%s: exactly one of params and attributes", at)
		case c.Decision != entry.Allow && c.Decision != entry.Deny && c.Decision != entry.NeedsApproval:
			return nil, fmt.Errorf("%s/decision: must be allow, deny or needs_approval", at)
		case c.Policies == nil:
			return nil, fmt.Errorf("%s/policies: missing (use [] for none)", at)
		}
		if j, dup := names[c.Name]; dup {
			return nil, fmt.Errorf("%s/name: repeats /cases/%d/name", at, j)
		}
		names[c.Name] = i
	}
	return &tf, nil
}

// caseOutcome is what one case gave.
type caseOutcome struct {
	Decision     entry.Decision
	Policies     []string
	PolicyErrors []string
	Problem      string // the call was refused before a decision
}

// runCase decides one case as ledgerd would.
func runCase(set *policy.Set, cat catalog.Catalog, opts declare.Options, c testCase) caseOutcome {
	a, ok := cat[c.Action]
	if !ok {
		return caseOutcome{Problem: "the action is not in the catalog"}
	}
	var attrs []byte
	if c.Params != nil {
		m, err := a.Declaration().Minimize(c.Params, opts)
		if err != nil {
			return caseOutcome{Problem: "the declaration refuses the params: " + err.Error()}
		}
		attrs = m.Attributes
	} else {
		canon, err := commit.Canonicalize(c.Attributes)
		if err != nil {
			return caseOutcome{Problem: "the attributes are not in the strict domain"}
		}
		request, _ := json.Marshal(map[string]json.RawMessage{"attributes": c.Attributes})
		if err := a.CheckAttributes(canon, request); err != nil {
			return caseOutcome{Problem: "the catalog refuses the attributes: " + err.Error()}
		}
		attrs = canon
	}
	r := set.Decide(c.Principal, c.Action, attrs)
	if r.Invalid != nil {
		return caseOutcome{Problem: "the policy set's schema refuses the request: " + r.Invalid.Problem}
	}
	return caseOutcome{Decision: r.Decision, Policies: r.Determining, PolicyErrors: r.Errored}
}

func (c testCase) passes(o caseOutcome) bool {
	want := slices.Sorted(slices.Values(c.Policies))
	return o.Problem == "" && o.Decision == c.Decision && slices.Equal(want, o.Policies) &&
		(c.PolicyErrors == nil || slices.Equal(slices.Sorted(slices.Values(c.PolicyErrors)), o.PolicyErrors))
}

func policyTest(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	catalogDir := fs.String("catalog", "", "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *catalogDir == "" {
		return badUsage("--catalog DIR is required")
	}
	if len(rest) < 2 {
		return badUsage("takes a policy directory and at least one test file")
	}
	dir, paths := rest[0], rest[1:]
	files := make([]*testFile, len(paths))
	for i, p := range paths {
		data, err := keyflag.ReadFileLimit(p, maxTestFile)
		if err != nil {
			return err
		}
		if files[i], err = parseTestFile(data); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
	}
	cat, err := catalog.Load(*catalogDir)
	if err != nil {
		return fmt.Errorf("--catalog %s: %w", *catalogDir, err)
	}
	set, err := policy.Load(dir, cat.Declarations())
	if err != nil {
		return policyRefusal(dir, err)
	}
	failed := 0
	for i, tf := range files {
		opts := declare.Options{Allowlists: map[string]map[string]bool{}}
		for name, list := range tf.Allowlists {
			opts.Allowlists[name] = map[string]bool{}
			for _, v := range list {
				opts.Allowlists[name][v] = true
			}
		}
		bad := 0
		for _, c := range tf.Cases {
			o := runCase(set, cat, opts, c)
			if c.passes(o) {
				continue
			}
			bad++
			got := o.Problem
			if got == "" {
				got = fmt.Sprintf("%s %s", o.Decision, ids(o.Policies))
				if c.PolicyErrors != nil || len(o.PolicyErrors) > 0 {
					got += fmt.Sprintf(" policy_errors %s", ids(o.PolicyErrors))
				}
			}
			want := fmt.Sprintf("%s %s", c.Decision, ids(c.Policies))
			if c.PolicyErrors != nil {
				want += fmt.Sprintf(" policy_errors %s", ids(c.PolicyErrors))
			}
			termtext.PrintLine(stdout, "FAIL: %s: case %s: expected %s, got %s", paths[i], termtext.Quote(c.Name), want, got)
		}
		if bad == 0 {
			termtext.PrintLine(stdout, "ok: %s: %s passed", paths[i], termtext.Count(len(tf.Cases), "case", "cases"))
		} else {
			termtext.PrintLine(stdout, "FAIL: %s: %d of %s passed, %d failed", paths[i], len(tf.Cases)-bad, termtext.Count(len(tf.Cases), "case", "cases"), bad)
		}
		failed += bad
	}
	if failed > 0 {
		return &refusal{msg: fmt.Sprintf("policy test: %s failed", termtext.Count(failed, "case", "cases"))}
	}
	return nil
}

// ids lists policy ids for a terminal, sorted.
func ids(list []string) string {
	q := make([]string, len(list))
	for i, s := range slices.Sorted(slices.Values(list)) {
		q[i] = termtext.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
