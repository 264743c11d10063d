package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/atomicfile"
)

// reloadHint is what the commands that change credentials (ledgerd token,
// ledgerd approver) print: how a running ledgerd takes the change.
const reloadHint = "ledgerd: a running ledgerd takes the change on SIGHUP: systemctl reload ledgerd, or kill -HUP <its pid>; " +
	"with several instances, signal each one, as each reads its own config file\n"

// token is "ledgerd token add NAME" and "ledgerd token rotate NAME".
func token(args []string, stdout, stderr io.Writer) int {
	op, code, ok := subcommand(args, "token", []string{"add", "rotate"}, stdout, stderr)
	if !ok {
		return code
	}
	fset := flag.NewFlagSet("token "+op, flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	var overlap time.Duration
	if op == "rotate" {
		fset.DurationVar(&overlap, "overlap", 0, "how long the old token stays valid beside the new one")
	}
	operands, code, ok := parseArgs(fset, args[1:], 1, stdout, stderr)
	if !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "token "+op, "%v", err)
	}
	if overlap < 0 {
		return usageError(stderr, "token "+op, "--overlap %v is negative", overlap)
	}
	name := operands[0]
	if err := config.CheckMediatorName(name); err != nil {
		return usageError(stderr, "token "+op, "mediator %v", err)
	}
	path, err := df.existing()
	if err != nil {
		return fail(stderr, "token %s: %v", op, err)
	}
	tok, hash := newToken()
	var rot config.TokenRotation
	err = editConfig(path, func(old []byte) (text []byte, err error) {
		if op == "add" {
			return config.AddMediatorToken(old, path, name, hash)
		}
		text, rot, err = config.RotateMediatorToken(old, path, name, hash, overlap, time.Now())
		return text, err
	})
	if err != nil {
		return fail(stderr, "token %s: %v", op, err)
	}
	fmt.Fprintln(stdout, tok)
	if op == "add" {
		fmt.Fprintf(stderr, "ledgerd: added mediator %q to %s, with the token printed on stdout: it is shown once, and only its SHA-256 is stored\n", name, path)
	} else {
		fmt.Fprintf(stderr, "ledgerd: new token for mediator %q in %s, printed on stdout: it is shown once, and only its SHA-256 is stored\n", name, path)
	}
	if rot.Dropped != "" {
		fmt.Fprintf(stderr, "ledgerd: the previous token of mediator %q, valid until %s, is dropped: refused from the reload on\n", name, rot.Dropped)
	}
	if rot.Expires != "" {
		fmt.Fprintf(stderr, "ledgerd: the old token stays valid beside the new one until %s (previous_token_expires)\n", rot.Expires)
	}
	fmt.Fprint(stderr, reloadHint)
	if op == "rotate" {
		fmt.Fprintf(stderr, "ledgerd: until then a running ledgerd takes the old token, not the new one\n")
	}
	return 0
}

// editConfig changes the config file at path by change, one of the
// changes of package config, given the file's text: the file is replaced
// with the changed text (replaceConfig), unless that is the text it had.
func editConfig(path string, change func(old []byte) ([]byte, error)) error {
	return editConfigMode(path, false, change)
}

// editConfigMode is editConfig, keeping the file's permission bits if
// keepMode (ledgerd config), else making them 0600.
func editConfigMode(path string, keepMode bool, change func(old []byte) ([]byte, error)) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text, err := change(old)
	if err != nil {
		return err
	}
	if bytes.Equal(text, old) {
		return nil
	}
	return replaceConfigMode(path, old, text, keepMode)
}

// replaceConfig replaces the config at path, whose text was old, by text:
// atomically, mode 0600, and with the owner of the file it replaces (when
// the owner differs from the user running ledgerd, which must then be
// root, a file of its own would leave ledgerd unable to read its config).
// It refuses if the file changed since old was read (another command
// changing it at once).
func replaceConfig(path string, old, text []byte) error {
	return replaceConfigMode(path, old, text, false)
}

// replaceConfigMode is replaceConfig, keeping the file's permission bits
// if keepMode.
func replaceConfigMode(path string, old, text []byte, keepMode bool) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	var mode os.FileMode // 0600
	if keepMode {
		mode = st.Mode().Perm()
	}
	return atomicfile.Write(path, text, atomicfile.Options{Mode: mode, BeforeRename: func(tmp string) error {
		if err := keepOwner(tmp, st); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, old) {
			return fmt.Errorf("%s changed while this command ran (another ledgerd token, approver or config at once?): nothing was written; run it again", path)
		}
		return nil
	}})
}
