package main

import (
	"bytes"
	"encoding/json"
	"errors"
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
	if err := changeApprovers(path, old, op, a); err != nil {
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

// changeApprovers adds approver a to the config at path, whose text was
// old ("add"; the approvals member is made if there is none), or removes
// the approver named a.Name ("remove"). Only approvals.approvers changes:
// every other member keeps its order and value, and the file is rewritten
// as "ledgerd token" rewrites it (replaceConfig).
func changeApprovers(path string, old []byte, op string, a approver.Approver) error {
	top, err := objectMembers(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ai, err := findOptionalMember(top, "approvals")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if ai < 0 {
		top = append(top, objectMember{"approvals", json.RawMessage(`{}`)})
		ai = len(top) - 1
	} else if bytes.Equal(bytes.TrimSpace(top[ai].value), []byte("null")) {
		top[ai].value = json.RawMessage(`{}`)
	}
	appr, err := objectMembers(top[ai].value)
	if err != nil {
		return fmt.Errorf("%s: approvals: %w", path, err)
	}
	li, err := findOptionalMember(appr, "approvers")
	if err != nil {
		return fmt.Errorf("%s: approvals: %w", path, err)
	}
	if li < 0 {
		appr = append(appr, objectMember{"approvers", json.RawMessage(`[]`)})
		li = len(appr) - 1
	}
	var list []json.RawMessage
	if err := json.Unmarshal(appr[li].value, &list); err != nil && !bytes.Equal(bytes.TrimSpace(appr[li].value), []byte("null")) {
		return fmt.Errorf("%s: approvals.approvers is not an array", path)
	}
	if op == "add" {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		list = append(list, b)
	} else {
		at := -1
		for i, raw := range list {
			var x approver.Approver
			if json.Unmarshal(raw, &x) == nil && x.Name == a.Name {
				at = i
			}
		}
		if at < 0 {
			return fmt.Errorf("no approver %q in %s", a.Name, path)
		}
		list = slices.Delete(list, at, at+1)
	}
	appr[li].value = joinArray(list)
	top[ai].value = joinObject(appr)
	var text bytes.Buffer
	if err := json.Indent(&text, joinObject(top), "", "  "); err != nil {
		return err
	}
	text.WriteByte('\n')
	// What is written must be a valid config with the change.
	changed, err := config.Parse(text.Bytes(), path)
	if err != nil {
		return fmt.Errorf("the changed config would be refused: %w", err)
	}
	has := changed.Approvals != nil && slices.ContainsFunc(changed.Approvals.Approvers, func(x approver.Approver) bool { return x.Name == a.Name })
	if has != (op == "add") {
		return errors.New("the changed config does not hold the change") // a bug
	}
	return replaceConfig(path, old, text.Bytes())
}

// findOptionalMember is findConfigMember for a member that may be
// absent: -1 then.
func findOptionalMember(ms []objectMember, key string) (int, error) {
	at := -1
	for i, m := range ms {
		if strings.EqualFold(m.key, key) {
			if at >= 0 {
				return 0, fmt.Errorf("%s appears twice: edit the config by hand", key)
			}
			at = i
		}
	}
	return at, nil
}
