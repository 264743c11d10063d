package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/config"
)

// stdin is where "ledgerd approver add" reads the password; a test sets
// it.
var stdin io.Reader = os.Stdin

// approverCommand is "ledgerd approver add NAME --actions A,B
// [--principals P,Q]" and "ledgerd approver remove NAME"
// (docs/approvals.md §Approvers).
func approverCommand(args []string, stdout, stderr io.Writer) int {
	op, code, ok := subcommand(args, "approver", []string{"add", "remove"}, stdout, stderr)
	if !ok {
		return code
	}
	fset := flag.NewFlagSet("approver "+op, flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	var actions, principals string
	if op == "add" {
		fset.StringVar(&actions, "actions", "", "")
		fset.StringVar(&principals, "principals", "", "")
	}
	operands, code, ok := parseArgs(fset, args[1:], 1, stdout, stderr)
	if !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "approver "+op, "%v", err)
	}
	name := operands[0]
	a := approver.Approver{Name: name}
	if op == "add" {
		if actions == "" {
			return usageError(stderr, "approver add", "--actions is required: the actions the approver may approve, comma-separated, or \"*\" for all")
		}
		a.Actions = strings.Split(actions, ",")
		if principals != "" {
			a.Principals = strings.Split(principals, ",")
		}
	}
	path, err := df.existing()
	if err != nil {
		return fail(stderr, "approver %s: %v", op, err)
	}
	// Refuse what can be refused before a password is asked for.
	old, cfg, err := readConfigFile(path)
	if err != nil {
		return fail(stderr, "approver %s: %v", op, err)
	}
	exists := cfg.Approvals != nil && slices.ContainsFunc(cfg.Approvals.Approvers, func(x approver.Approver) bool { return x.Name == name })
	switch {
	case op == "add" && exists:
		return fail(stderr, "approver add: approver %q exists in %s: \"ledgerd approver remove\" it first to change it", name, path)
	case op == "remove" && !exists:
		return fail(stderr, "approver remove: no approver %q in %s", name, path)
	}
	if op == "add" {
		if f, ok := stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintf(stderr, "Password for approver %q (at least 12 characters; it is shown as typed): ", name)
			}
		}
		pw, err := approver.ReadPassword(stdin)
		if err != nil {
			return fail(stderr, "approver add: the password: %v", err)
		}
		if a.PasswordHash, err = approver.HashPassword(pw); err != nil {
			return fail(stderr, "approver add: %v", err)
		}
		if err := a.Check(); err != nil {
			return usageError(stderr, "approver add", "%v", err)
		}
	}
	var text []byte
	if op == "add" {
		text, err = config.AddApprover(old, path, a)
	} else {
		text, err = config.RemoveApprover(old, path, name)
	}
	if err == nil {
		err = replaceConfig(path, old, text)
	}
	if err != nil {
		return fail(stderr, "approver %s: %v", op, err)
	}
	if op == "add" {
		fmt.Fprintf(stderr, "ledgerd: added approver %q to %s; only the argon2id hash of the password is stored\n", name, path)
		if cfg.Approvals == nil {
			fmt.Fprintf(stderr, "ledgerd: %s had no approvals member: approvals are on from the next start, with the default deadlines (pending 24h, execution 1h)\n", path)
		}
	} else {
		fmt.Fprintf(stderr, "ledgerd: removed approver %q from %s\n", name, path)
	}
	if cfg.Approvals == nil {
		fmt.Fprintf(stderr, "ledgerd: restart ledgerd to turn approvals on\n")
	} else {
		fmt.Fprint(stderr, reloadHint)
	}
	return 0
}

// readConfigFile reads and checks the config at path.
func readConfigFile(path string) ([]byte, *config.Config, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Parse(old, path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (fix the config first)", err)
	}
	return old, cfg, nil
}
