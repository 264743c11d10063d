// Command ledger-verify is the auditor's offline tool. It trusts nothing
// but the verifier key it is given on the command line (and, with
// --trusted, a checkpoint it verified before).
//
// Usage:
//
//	ledger-verify export (--key VKEY | --key-file FILE | --trust FILE)... [--trusted CHECKPOINT] [--prev HASH] [--all] [--json] EXPORT
//	ledger-verify find   (--key VKEY | --key-file FILE | --trust FILE)... [filters] [--json] EXPORT
//	ledger-verify params (--key VKEY | --key-file FILE | --trust FILE)... --export EXPORT [--index N] [--allow-non-integer] [--json] CANDIDATE
//	ledger-verify proof  (--key VKEY | --key-file FILE | --trust FILE)... [--params CANDIDATE] [--write-checkpoint FILE] [--json] TLOG-PROOF
//	ledger-verify tiers  (--key VKEY | --key-file FILE | --trust FILE)... --export EXPORT --index N [--json] DECLARATION
//	ledger-verify disclose (--key VKEY | --key-file FILE | --trust FILE)... --export EXPORT --index N [--declaration FILE] [--allowlists FILE] [--allow-non-integer] [--json] DISCLOSURE
//	ledger-verify decisions (--key VKEY | --key-file FILE | --trust FILE)... [--policies DIR]... [--all] [--json] EXPORT
//	ledger-verify approvals (--key VKEY | --key-file FILE | --trust FILE)... [--trusted CHECKPOINT] [--prev HASH] [--all] [--json] EXPORT
//	ledger-verify consistency (--key VKEY | --key-file FILE | --trust FILE)... [--json] OLD NEW [PROOF | --url URL]
//	ledger-verify monitor (--key VKEY | --key-file FILE | --trust FILE)... --state FILE [--init] [--archive DIR] URL
//	ledger-verify digest [--allow-non-integer] [--canonical] [--json] FILE
//	ledger-verify help [COMMAND]
//	ledger-verify version
//
// export verifies an export file (docs/export.md); find verifies one,
// then lists the entries matching filters (principal, action, decision,
// policy, time, parameter digest, approval, kind); params and tiers verify
// one, then compare one entry with candidate parameters (docs/commitment.md;
// params without --index lists the entries committed to them)
// or with an action declaration (docs/declarations.md); disclose opens one
// entry's hiding commitment with a disclosure file and recomputes the
// disclosed fields' attributes (docs/commitment.md §7); decisions verifies
// one, then replays every decision the ledger made with the policy set it
// names (docs/export.md §5); approvals verifies one, then checks every
// approval lifecycle it holds — verdicts, consumptions and outcomes —
// against the rules of docs/approvals.md; proof verifies a
// C2SP tlog-proof file; consistency checks that two signed checkpoint
// files are of one history; monitor follows a log from cron through its
// tlog-tiles API, keeping state between runs (docs/operations.md
// "Monitoring"); digest prints a parameter commitment. Options may
// come before or after the file. "ledger-verify help COMMAND" (or
// "ledger-verify COMMAND --help") prints a command's usage.
//
// Exit status: 0 verified (find: an entry matches; params, tiers: match; decisions: every ledger
// decision agrees; approvals: no entry breaks a lifecycle rule), 1
// verification failed (or no match, mismatch, disagreement, refused input, or a
// lifecycle violation), 2 bad usage or unreadable input; consistency and
// monitor: 3 two checkpoints signed by the key are not of one history (a
// fork: monitor writes both as evidence), 4 the log could not be read.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/internal/cliflag"
	"github.com/decisionledger/ledger/internal/termtext"
)

// command is one subcommand: its name, a one-line synopsis for the list
// of commands, its own usage text (age's sections: Usage, a description,
// Options, Examples), and what runs it.
type command struct {
	name, synopsis, usage string
	run                   func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = []command{
	{"export", "Verify an export file offline against the ledger's verifier key.", exportUsage, runExport},
	{"find", "Verify an export, then list the entries matching filters.", findUsage, runFind},
	{"params", "Verify an export, then compare entry N with candidate parameters.", paramsUsage, runParams},
	{"proof", "Verify a C2SP tlog-proof file holding one entry.", proofUsage, runProof},
	{"tiers", "Verify an export, then compare entry N with an action declaration.", tiersUsage, runTiers},
	{"disclose", "Verify an export, then open entry N's hiding commitment with a disclosure.", discloseUsage, runDisclose},
	{"decisions", "Verify an export, then replay the ledger's decisions with their policy sets.", decisionsUsage, runDecisions},
	{"approvals", "Verify an export, then check every approval lifecycle it holds.", approvalsUsage, runApprovals},
	{"consistency", "Verify that two signed checkpoint files are of one history.", consistencyUsage, runConsistency},
	{"monitor", "Follow a log from cron: verify its new checkpoint and entries, keep state.", monitorUsage, runMonitor},
	{"digest", "Print the parameter commitment of a JSON parameter file.", digestUsage, runDigest},
	{"version", "Print the module version and VCS revision of this binary.", versionUsage, runVersion},
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usage is the top-level usage text: every command's usage lines, one
// synopsis per command, the exit statuses and an example.
func usage() string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	for _, c := range commands {
		b.WriteString(usageLines(c.usage))
	}
	fmt.Fprintf(&b, "    %s help [COMMAND]\n", programName)
	fmt.Fprintf(&b, "    %s completion (bash | zsh)\n", programName)
	b.WriteString(`
ledger-verify checks, offline, what a decision ledger produced, trusting
nothing but the ledger's verifier key given with --key or --key-file.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "    %-9s %s\n", c.name, c.synopsis)
	}
	fmt.Fprintf(&b, "    %-9s %s\n", "help", "Print a command's usage, options and examples.")
	fmt.Fprintf(&b, "    %-9s %s\n", "completion", "Print the bash or zsh completion script (source <(ledger-verify completion bash)).")
	b.WriteString(`
Options may come before or after the file argument. --version prints the
version, as the version command does.

Environment:
    LEDGER_TOKEN     A reader's bearer token (consistency --url, monitor),
                     when --token-file is not given.
    LEDGER_PROGRESS  The progress line of a long verification (every
                     command that verifies an export, monitor) on stderr,
                     drawn only when stderr is a terminal (never on a pipe
                     or a file): auto or unset, after the run's first
                     second and at most four times a second; off, never;
                     now, from the first entry (docs/operations.md,
                     "Progress").

Exit status: 0 verified (find: an entry matches; params, tiers: match;
decisions: all agree; approvals: no violation), 1 verification failed
(find: no entry matches; params, tiers: mismatch or refused; decisions:
a decision disagrees or cannot be replayed; approvals: an entry breaks a
lifecycle rule), 2 bad usage or unreadable input; consistency and
monitor: 3 two checkpoints signed by the key are not of one history (a
fork), 4 the log could not be read.

Example:
    $ ledger-verify export --key-file ledger.vkey export.ledger
    verified: entries 0 to 999 (1000 entries) of ledger.example.com/log
      checkpoint: tree size 1000
      last entry hash: sha256:...

Run 'ledger-verify help COMMAND' for a command's options and examples.
`)
	return b.String()
}

// usageLines returns the lines of a command's usage text between "Usage:"
// and the first empty line.
func usageLines(text string) string {
	text = strings.TrimPrefix(text, "Usage:\n")
	lines, _, _ := strings.Cut(text, "\n\n")
	return lines + "\n"
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "ledger-verify"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return exitOK
	case "-version", "--version":
		return runVersion(args[1:], nil, stdout, stderr)
	case "help":
		return runHelp(args[1:], stdout, stderr)
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	}
	if c := lookup(args[0]); c != nil {
		return c.run(args[1:], stdin, stdout, stderr)
	}
	errorf(stderr, "unknown command %q", args[0])
	hintf(stderr, "run '%s help' for the list of commands", programName)
	return exitUsage
}

// runHelp prints the usage of the command it names, or the top-level
// usage, on standard output.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || len(args) == 1 && slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]):
		fmt.Fprint(stdout, usage())
		return exitOK
	case len(args) > 1:
		errorf(stderr, "help takes at most one COMMAND")
		hintf(stderr, "run '%s help' for the list of commands", programName)
		return exitUsage
	}
	c := lookup(args[0])
	if c == nil {
		errorf(stderr, "help: unknown command %q", args[0])
		hintf(stderr, "run '%s help' for the list of commands", programName)
		return exitUsage
	}
	fmt.Fprint(stdout, c.usage)
	return exitOK
}

const versionUsage = `Usage:
    ledger-verify version

Print the module version and the VCS revision this binary was built from,
as --version does: "(devel)" for a build from a checkout, "unknown
revision" when Go recorded none.
`

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	rest, code, ok := parseFlags(fs, versionUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 0 {
		return usageError(stderr, "version", "takes no arguments")
	}
	termtext.PrintLine(stdout, "%s", buildinfo.Line(programName))
	return exitOK
}

// onHelp, if set, sees the flag set of a command asked for its help: the
// tests hold each command's usage text to the flags it defines.
var onHelp func(*flag.FlagSet)

// parseFlags parses a command's flags, which may stand before, between or
// after its other arguments (cliflag), and returns the other arguments.
// For -h, -help or --help it prints the command's usage on standard
// output (exit status 0); for a bad flag, an error and a hint on standard
// error (exit status 2); ok is false in both cases.
func parseFlags(fs *flag.FlagSet, text string, args []string, stdout, stderr io.Writer) (rest []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	rest, err := cliflag.Parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if onHelp != nil {
			onHelp(fs)
		}
		fmt.Fprint(stdout, text)
		return nil, exitOK, false
	case err != nil:
		return nil, usageError(stderr, fs.Name(), "%v", err), false
	}
	return rest, exitOK, true
}

// usageError reports bad usage of the command cmd: an error, a hint
// naming the command's help, exit status 2.
func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	errorf(stderr, "%s: %s", cmd, fmt.Sprintf(format, args...))
	hintf(stderr, "run '%s help %s' for its usage and examples", programName, cmd)
	return exitUsage
}

// errorf and hintf write a line to standard error, escaped (termtext.PrintLine):
// the message may quote input.
func errorf(w io.Writer, format string, args ...any) {
	termtext.PrintLine(w, "%s: error: %s", programName, fmt.Sprintf(format, args...))
}

func hintf(w io.Writer, format string, args ...any) {
	termtext.PrintLine(w, "%s: hint: %s", programName, fmt.Sprintf(format, args...))
}

// readInput reads a named file, or standard input for "-".
func readInput(name string, stdin io.Reader, limit int) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	// Read one byte past the limit so the domain reports too_large itself.
	return io.ReadAll(io.LimitReader(r, int64(limit)+1))
}
