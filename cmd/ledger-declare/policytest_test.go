package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/referencecalls"
)

var update = flag.Bool("update", false, "rewrite testdata/policytests/reference.json from the referencecalls table")

// referenceTests is the test file over the reference corpus.
var referenceTests = filepath.Join("..", "..", "testdata", "policytests", "reference.json")

// maxInlineParams is the largest raw parameters the reference test file
// writes as params; larger calls (the long bodies) are written as their
// minimized attributes.
const maxInlineParams = 4 << 10

// refCase is a case as -update writes it, members in reading order.
type refCase struct {
	Name       string          `json:"name"`
	Principal  string          `json:"principal"`
	Action     string          `json:"action"`
	Params     map[string]any  `json:"params,omitempty"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
	Decision   string          `json:"decision"`
	Policies   []string        `json:"policies"`
}

// TestReferenceTestFile requires the reference test file to be the
// referencecalls table, row by row: the same names, principals, actions,
// expected decisions and policies, and either the row's raw parameters or
// their minimization. The table is the source of truth; -update rewrites
// the file from it.
func TestReferenceTestFile(t *testing.T) {
	decls, err := referencecalls.Declarations(filepath.Join("..", "..", "testdata", "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	table := referencecalls.Table()
	if *update {
		var tf struct {
			Allowlists map[string][]string `json:"allowlists"`
			Cases      []refCase           `json:"cases"`
		}
		tf.Allowlists = map[string][]string{}
		for name, list := range referencecalls.Allowlists {
			for v := range list {
				tf.Allowlists[name] = append(tf.Allowlists[name], v)
			}
			slices.Sort(tf.Allowlists[name])
		}
		for _, c := range table {
			row := refCase{Name: c.Name, Principal: c.Principal, Action: c.Action, Decision: string(c.Decision), Policies: c.Determining}
			raw, _ := json.Marshal(c.Params)
			if len(raw) <= maxInlineParams {
				row.Params = c.Params
			} else {
				m, err := referencecalls.Minimize(decls, c)
				if err != nil {
					t.Fatal(err)
				}
				row.Attributes = json.RawMessage(m.Attributes)
			}
			tf.Cases = append(tf.Cases, row)
		}
		out, err := json.MarshalIndent(tf, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(referenceTests, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(referenceTests)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := parseTestFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(tf.Cases) != len(table) {
		t.Fatalf("%d cases, the table has %d rows", len(tf.Cases), len(table))
	}
	for name, list := range referencecalls.Allowlists {
		for v := range list {
			if !slices.Contains(tf.Allowlists[name], v) {
				t.Errorf("allowlist %s lacks an entry of the table's", name)
			}
		}
		if len(tf.Allowlists[name]) != len(list) {
			t.Errorf("allowlist %s: %d entries, the table's %d", name, len(tf.Allowlists[name]), len(list))
		}
	}
	inline := 0
	for i, c := range table {
		got := tf.Cases[i]
		if got.Name != c.Name || got.Principal != c.Principal || got.Action != c.Action || got.Decision != c.Decision || !slices.Equal(got.Policies, c.Determining) {
			t.Errorf("case %d: %q %s %s %s %v, the table's %q %s %s %s %v", i, got.Name, got.Principal, got.Action, got.Decision, got.Policies,
				c.Name, c.Principal, c.Action, c.Decision, c.Determining)
			continue
		}
		if got.Params != nil {
			inline++
			want, _ := json.Marshal(c.Params)
			a, err1 := commit.Canonicalize(got.Params)
			b, err2 := commit.Canonicalize(want)
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("case %q: params differ from the table's", c.Name)
			}
			continue
		}
		m, err := referencecalls.Minimize(decls, c)
		if err != nil {
			t.Fatal(err)
		}
		a, err := commit.Canonicalize(got.Attributes)
		if err != nil || !bytes.Equal(a, m.Attributes) {
			t.Errorf("case %q: attributes are not the minimization of the table's params", c.Name)
		}
	}
	if inline == 0 || inline == len(table) {
		t.Errorf("%d of %d cases as params: the file should exercise both forms", inline, len(table))
	}
}

// TestPolicyTestReference runs the reference test file over the reference
// set: every case passes.
func TestPolicyTestReference(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"policy", "test", filepath.Join("..", "..", "testdata", "policies"),
		"--catalog", filepath.Join("..", "..", "testdata", "declarations"), referenceTests}, &stdout, &stderr)
	if code != 0 || stdout.String() != "ok: "+referenceTests+": 45 cases passed\n" || stderr.Len() != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
}
