package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/policy"
)

// The policy commands are for policy authors (docs/policies.md §12): they
// check, test and compare policy sets offline with ledgerd's own code.

const policyUsage = `Usage:
    ledger-declare policy check DIR --catalog DIR
    ledger-declare policy test DIR --catalog DIR TESTFILE...
    ledger-declare policy whatif (--key VKEY)... --policies DIR [--catalog DIR] [--json] EXPORT

The policy author's commands (docs/policies.md §12): check a policy
directory as ledgerd loads it, run example calls against it, and show which
recorded decisions of an export an edited set would change.

Run 'ledger-declare help policy COMMAND' for a command's options and
examples.
`

const policyCheckUsage = `Usage:
    ledger-declare policy check DIR --catalog DIR

Check the policy directory DIR exactly as ledgerd does at start
(policy.Load against the Cedar schema of the catalog's declarations),
offline. A refusal names the file, line and column, the policy's id and the
problem; for an attribute no declaration has, the attribute's own line and
column and, when there is one, the nearest declared name.

Options:
    --catalog DIR    The action catalog (catalog_dir): the declarations,
                     *.json. Required.

Exit status: 0 the set is valid, 1 it is refused, 2 bad usage or an
unreadable catalog or directory.

Examples:
    $ ledger-declare policy check policies --catalog decl
    ok: policies: 17 policies in 5 files, sha256:...
    $ ledger-declare policy check policies --catalog decl
    ledger-declare: error: policies/payments.cedar:6:3: policy "payments.allow-known-payee": names an undeclared attribute: ...
    ledger-declare: hint: did you mean amount_minor?
`

// loadPolicies loads dir against the catalog in catalogDir as ledgerd
// does (daemon.LoadFiles): catalog.Load, then policy.Load.
func loadPolicies(dir, catalogDir string) (*policy.Set, []*declare.Declaration, error) {
	cat, err := catalog.Load(catalogDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--catalog %s: %w", catalogDir, err)
	}
	decls := cat.Declarations()
	set, err := policy.Load(dir, decls)
	if err != nil {
		return nil, nil, policyRefusal(dir, err)
	}
	return set, decls, nil
}

// policyRefusal makes a policy.Load error a refusal (exit 1) naming the
// file by its path, with a "did you mean" hint for an undeclared
// attribute; a directory that cannot be read stays an input error (2).
func policyRefusal(dir string, err error) error {
	var le *policy.LoadError
	if !errors.As(err, &le) {
		return err
	}
	if le.File == "" && errors.Is(err, policy.ErrLayout) && le.Problem == "cannot read the policy directory" {
		return fmt.Errorf("%s: %s", dir, le.Problem)
	}
	e := *le
	if e.File != "" {
		e.File = filepath.Join(dir, e.File)
	}
	msg := e.Error()
	if le.File == "" {
		msg = fmt.Sprintf("%s: %s", dir, msg)
	}
	r := &refusal{msg: msg}
	var ae *policy.AttributeError
	if errors.As(err, &ae) && ae.Nearest != "" && !ae.Payload {
		r.hints = append(r.hints, fmt.Sprintf("did you mean %s?", ae.Nearest))
	}
	return r
}

// refusal is a refused input (exit status 1) with hint lines.
type refusal struct {
	msg   string
	hints []string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return errRefused }

func policyCheck(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("policy check", flag.ContinueOnError)
	catalogDir := fs.String("catalog", "", "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return badUsage("takes one policy directory")
	}
	if *catalogDir == "" {
		return badUsage("--catalog DIR is required")
	}
	set, _, err := loadPolicies(rest[0], *catalogDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %s: %s in %s, %s\n", rest[0],
		termtext.Count(len(set.Policies()), "policy", "policies"), termtext.Count(len(set.Files()), "file", "files"), set.Digest())
	return nil
}
