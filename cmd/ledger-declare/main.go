// Command ledger-declare turns action declarations (docs/declarations.md)
// into the artifacts that must agree with them, for review, and reports
// what each action lets cross.
//
// Usage:
//
//	ledger-declare render [--out DIR] DECLARATION...
//	ledger-declare report [--json] DECLARATION...
//	ledger-declare digest DECLARATION
//	ledger-declare policy check DIR --catalog DIR
//	ledger-declare policy test DIR --catalog DIR TESTFILE...
//	ledger-declare policy whatif (--key VKEY)... --policies DIR [--catalog DIR] [--json] EXPORT
//	ledger-declare help [COMMAND]
//	ledger-declare version
//
// render checks each declaration, generates its tier table, its JSON Schema
// and one Cedar schema for all of them, checks the Cedar schema with
// cedar-go and the JSON Schemas with santhosh-tekuri/jsonschema, and
// writes them to DIR (default "."): <action>.tiers.json,
// <action>.schema.json and actions.cedarschema. Options may come before or
// after the files; "ledger-declare help COMMAND" (or "ledger-declare
// COMMAND --help") prints a command's usage.
//
// The policy commands are the policy author's (docs/policies.md §12):
// check validates a policy directory as ledgerd does at start, test runs
// example calls against it, whatif re-evaluates an export's ledger
// decisions under an edited set.
//
// Exit status: 0 on success, 1 when a declaration, a policy set, a test
// case or an export is refused, 2 on bad usage or unreadable input.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/internal/cliflag"
	"github.com/decisionledger/ledger/internal/declfile"
	"github.com/decisionledger/ledger/internal/termtext"
)

const programName = "ledger-declare"

// command is one subcommand: its name, a one-line synopsis, its own usage
// text, and what runs it. run returns a *usageError for bad usage,
// flag.ErrHelp for -h and --help, an error wrapping errRefused for a
// refused declaration, and other errors for unreadable input.
type command struct {
	name, synopsis, usage string
	run                   func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"render", "Check declarations and write their artifacts for review.", renderUsage, render},
	{"report", "Print the leakage report: which fields cross, and how.", reportUsage, report},
	{"digest", "Print a declaration's applied-tiers and action definition digests.", digestUsage, digest},
	{"version", "Print the module version and VCS revision of this binary.", versionUsage, version},
	{"policy", "Check, test and compare policy sets (policy check|test|whatif).", policyUsage, nil},
	{"policy check", "", policyCheckUsage, policyCheck},
	{"policy test", "", policyTestUsage, policyTest},
	{"policy whatif", "", policyWhatifUsage, policyWhatif},
}

// lookupArgs finds the command args name, a group's subcommand taking
// two words ("policy check"), and returns the arguments after it.
func lookupArgs(args []string) (*command, []string) {
	if len(args) > 1 && args[0] == "policy" && !strings.HasPrefix(args[1], "-") {
		if c := lookup("policy " + args[1]); c != nil {
			return c, args[2:]
		}
		return nil, args
	}
	return lookup(args[0]), args[1:]
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
// synopsis per command, the exit statuses.
func usage() string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	for _, c := range commands {
		if c.synopsis == "" || c.run == nil {
			continue // a group's subcommand; the group's usage has it
		}
		lines, _, _ := strings.Cut(strings.TrimPrefix(c.usage, "Usage:\n"), "\n\n")
		b.WriteString(lines + "\n")
	}
	lines, _, _ := strings.Cut(strings.TrimPrefix(policyUsage, "Usage:\n"), "\n\n")
	b.WriteString(lines + "\n")
	fmt.Fprintf(&b, "    %s help [COMMAND]\n", programName)
	b.WriteString(`
ledger-declare turns action declarations (docs/declarations.md) into the
artifacts that must agree with them, for review, and reports what each
action lets cross.

Commands:
`)
	for _, c := range commands {
		if c.synopsis != "" {
			fmt.Fprintf(&b, "    %-9s %s\n", c.name, c.synopsis)
		}
	}
	fmt.Fprintf(&b, "    %-9s %s\n", "help", "Print a command's usage, options and examples.")
	b.WriteString(`
Options may come before or after the files. --version prints the version,
as the version command does.

Environment:
    LEDGER_PROGRESS  policy whatif's progress line on stderr, drawn only
                     when stderr is a terminal (never on a pipe or a
                     file): auto or unset, after the run's first second;
                     off, never; now, from the first entry
                     (docs/operations.md, "Progress").

Exit status: 0 success, 1 a declaration (or, for policy, a policy set, a
test case or an export) refused, 2 bad usage or unreadable input.

Example:
    $ ledger-declare digest decl/send_email.json
    action            send_email
    tiers_digest      sha256:18824ccc509c09ce6759b05c85686d44b4a45bf16240fabda33221d05fcf3e98
    definition_digest sha256:...

Run 'ledger-declare help COMMAND' for a command's options and examples.
`)
	return b.String()
}

const renderUsage = `Usage:
    ledger-declare render [--out DIR] DECLARATION...

Check the declarations and write, for review, each action's tier table
with its applied-tiers digest (<action>.tiers.json), the JSON Schema of its
wire attributes (<action>.schema.json), and one Cedar schema for all the
actions (actions.cedarschema). The Cedar schema is checked with cedar-go and
the JSON Schemas with a 2020-12 validator before anything is written. Two
files for one action are refused. A draft still marked "reviewed": false is
rendered, and named as unreviewed after the files written.

Options:
    --out DIR    The directory to write to (default ".", made if missing).

Examples:
    $ ledger-declare render --out review decl/send_email.json decl/http_request.json
    wrote review/actions.cedarschema
    wrote review/http_request.schema.json
    ...
`

const reportUsage = `Usage:
    ledger-declare report [--json] DECLARATION...

The leakage report: per action and in total, which fields cross raw
(policy), only as projections (derived) or never (payload), as a Markdown
table. An action whose declaration is a draft still marked "reviewed":
false is followed by "(unreviewed)" ("unreviewed": true with --json).

Options:
    --json    Machine-readable output on standard output.

Examples:
    $ ledger-declare report decl/*.json
    | action | fields | raw (policy) | as projections (derived) | never (payload) |
    ...
`

const digestUsage = `Usage:
    ledger-declare digest DECLARATION

Print a declaration's action, its applied-tiers digest and its action
definition digest, as entries record them; for a draft still marked
"reviewed": false, a status line that says it is unreviewed.

Examples:
    $ ledger-declare digest decl/send_email.json
    action            send_email
    tiers_digest      sha256:18824ccc509c09ce6759b05c85686d44b4a45bf16240fabda33221d05fcf3e98
    definition_digest sha256:...
`

const versionUsage = `Usage:
    ledger-declare version

Print the module version and the VCS revision this binary was built from,
as --version does: "(devel)" for a build from a checkout, "unknown
revision" when Go recorded none.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errRefused marks a refused declaration (exit status 1).
var errRefused = errors.New("refused")

// usageError is bad usage of a command (exit status 2, with a hint).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func badUsage(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// parseFlags parses fs's flags wherever they stand among args and returns
// the other arguments; its errors are flag.ErrHelp or a *usageError.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	rest, err := cliflag.Parse(fs, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		err = &usageError{err}
	}
	return rest, err
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return 0
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	case "help":
		return help(args[1:], stdout, stderr)
	}
	c, rest := lookupArgs(args)
	if c == nil {
		errorf(stderr, "unknown command %q", strings.Join(args[:min(len(args), 2)], " "))
		hintf(stderr, "run '%s help' for the list of commands", programName)
		return 2
	}
	if c.run == nil { // a group named without its subcommand
		if len(rest) == 1 && slices.Contains([]string{"-h", "-help", "--help"}, rest[0]) {
			fmt.Fprint(stdout, c.usage)
			return 0
		}
		errorf(stderr, "%s: a command is needed (check, test or whatif)", c.name)
		fmt.Fprint(stderr, c.usage)
		return 2
	}
	err := c.run(rest, stdout, stderr)
	var ue *usageError
	var rf *refusal
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, c.usage)
		return 0
	case errors.As(err, &ue):
		errorf(stderr, "%s: %v", c.name, ue)
		hintf(stderr, "run '%s help %s' for its usage and examples", programName, c.name)
		return 2
	case errors.As(err, &rf):
		errorf(stderr, "%v", rf)
		for _, h := range rf.hints {
			hintf(stderr, "%s", h)
		}
		return 1
	case errors.Is(err, errRefused):
		errorf(stderr, "%v", err)
		return 1
	default:
		errorf(stderr, "%v", err)
		return 2
	}
}

// help prints the usage of the command it names, or the top-level usage,
// on standard output.
func help(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || len(args) == 1 && slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]):
		fmt.Fprint(stdout, usage())
		return 0
	case len(args) == 2 && args[0] == "policy":
		args = []string{"policy " + args[1]}
	}
	switch {
	case len(args) > 1:
		errorf(stderr, "help takes at most one COMMAND")
		hintf(stderr, "run '%s help' for the list of commands", programName)
		return 2
	}
	c := lookup(args[0])
	if c == nil {
		errorf(stderr, "help: unknown command %q", args[0])
		hintf(stderr, "run '%s help' for the list of commands", programName)
		return 2
	}
	fmt.Fprint(stdout, c.usage)
	return 0
}

func version(args []string, stdout, _ io.Writer) error {
	rest, err := parseFlags(flag.NewFlagSet("version", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return badUsage("takes no arguments")
	}
	fmt.Fprintln(stdout, termtext.Escape(buildinfo.Line(programName)))
	return nil
}

// errorf and hintf write an error or a hint line to standard error,
// escaped: the message may repeat a declaration's text or a file name.
func errorf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s: error: %s\n", programName, termtext.Escape(fmt.Sprintf(format, args...)))
}

func hintf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s: hint: %s\n", programName, termtext.Escape(fmt.Sprintf(format, args...)))
}

// load reads and checks declaration files, sorted by action; two files for
// one action are refused.
func load(paths []string) ([]*declare.Declaration, error) {
	if len(paths) == 0 {
		return nil, badUsage("no declaration file given")
	}
	files, err := declfile.Read(paths)
	if errors.Is(err, declfile.ErrRefused) {
		return nil, fmt.Errorf("%w: %v", errRefused, strings.TrimPrefix(err.Error(), declfile.ErrRefused.Error()+": "))
	}
	if err != nil {
		return nil, err
	}
	decls := make([]*declare.Declaration, len(files))
	for i, f := range files {
		decls[i] = f.Decl
	}
	slices.SortFunc(decls, func(a, b *declare.Declaration) int { return strings.Compare(a.Action, b.Action) })
	return decls, nil
}

func render(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	out := fs.String("out", ".", "")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	decls, err := load(paths)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	cedar := declare.CedarSchema(decls...)
	var cs schema.Schema
	if err := cs.UnmarshalCedar(cedar); err != nil {
		return fmt.Errorf("%w: the generated Cedar schema does not parse: %v", errRefused, err)
	}
	if _, err := cs.Resolve(); err != nil {
		return fmt.Errorf("%w: the generated Cedar schema does not resolve: %v", errRefused, err)
	}
	files["actions.cedarschema"] = cedar
	for _, d := range decls {
		table, err := tierFile(d)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errRefused, d.Action, err)
		}
		files[d.Action+".tiers.json"] = table
		if _, err := declfile.CompileSchema(d); err != nil {
			return fmt.Errorf("%w: %s: the generated JSON Schema does not compile: %v", errRefused, d.Action, err)
		}
		files[d.Action+".schema.json"] = d.JSONSchema()
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(*out, name), files[name], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, name))
	}
	for _, d := range decls {
		if !d.Reviewed() {
			fmt.Fprintf(stdout, "%s: %s\n", d.Action, unreviewedNote)
		}
	}
	return nil
}

// tierFile is the reviewable tier table: the canonical table, its digest
// and the action definition digest.
func tierFile(d *declare.Declaration) ([]byte, error) {
	table, err := d.TierTable().Canonical()
	if err != nil {
		return nil, err
	}
	tiers, err := d.TiersDigest()
	if err != nil {
		return nil, err
	}
	def, err := d.Digest()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(struct {
		TiersDigest      string          `json:"tiers_digest"`
		DefinitionDigest string          `json:"definition_digest"`
		Table            json.RawMessage `json:"table"`
	}{tiers.String(), def.String(), table}, "", "  ")
	return append(out, '\n'), err
}

// leakage counts one action's fields by how far they cross.
type leakage struct {
	Action     string   `json:"action"`
	Unreviewed bool     `json:"unreviewed,omitempty"` // a draft with "reviewed": false
	Raw        []string `json:"raw"`
	Derived    []string `json:"derived"` // "field (projection, …)"
	Never      []string `json:"never"`
}

func report(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	decls, err := load(files)
	if err != nil {
		return err
	}
	var rows []leakage
	var raw, derived, never int
	for _, d := range decls {
		row := leakage{Action: d.Action, Unreviewed: !d.Reviewed(), Raw: []string{}, Derived: []string{}, Never: []string{}}
		for _, f := range d.Fields {
			switch f.Tier {
			case tier.Policy:
				row.Raw = append(row.Raw, f.Name)
			case tier.Derived:
				row.Derived = append(row.Derived, fmt.Sprintf("%s (%s)", f.Name, strings.Join(f.Projections, ", ")))
			case tier.Payload:
				row.Never = append(row.Never, f.Name)
			}
		}
		raw, derived, never = raw+len(row.Raw), derived+len(row.Derived), never+len(row.Never)
		rows = append(rows, row)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"actions": rows, "total": map[string]int{"fields": raw + derived + never, "raw": raw, "derived": derived, "never": never},
		})
	}
	fmt.Fprintln(stdout, "| action | fields | raw (policy) | as projections (derived) | never (payload) |")
	fmt.Fprintln(stdout, "| --- | --- | --- | --- | --- |")
	for _, r := range rows {
		action := r.Action
		if r.Unreviewed {
			action += " (unreviewed)"
		}
		fmt.Fprintf(stdout, "| %s | %d | %s | %s | %s |\n", action, len(r.Raw)+len(r.Derived)+len(r.Never),
			list(r.Raw), list(r.Derived), list(r.Never))
	}
	total := raw + derived + never
	fmt.Fprintf(stdout, "| **total** | %d | %d (%d %%) | %d (%d %%) | %d (%d %%) |\n", total,
		raw, percent(raw, total), derived, percent(derived, total), never, percent(never, total))
	return nil
}

func list(s []string) string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%d: %s", len(s), strings.Join(s, "; "))
}

func percent(n, total int) int {
	if total == 0 {
		return 0
	}
	return (200*n + total) / (2 * total) // rounded
}

func digest(args []string, stdout, _ io.Writer) error {
	files, err := parseFlags(flag.NewFlagSet("digest", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return badUsage("takes one declaration file")
	}
	decls, err := load(files)
	if err != nil {
		return err
	}
	d := decls[0]
	tiers, err := d.TiersDigest()
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	def, err := d.Digest()
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	fmt.Fprintf(stdout, "action            %s\ntiers_digest      %s\ndefinition_digest %s\n", d.Action, tiers, def)
	if !d.Reviewed() {
		fmt.Fprintf(stdout, "status            %s\n", unreviewedNote)
	}
	return nil
}

// unreviewedNote is what the commands say of a declaration that still
// carries "reviewed": false.
const unreviewedNote = `unreviewed: a draft ("reviewed": false) that ledgerd refuses until a person reviews it and removes the member`
