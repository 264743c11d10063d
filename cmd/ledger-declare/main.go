// Command ledger-declare turns action declarations (docs/declarations.md)
// into the artifacts that must agree with them, for review, and reports
// what each action lets cross.
//
// Usage:
//
//	ledger-declare render [--out DIR] DECLARATION...
//	ledger-declare report [--json] DECLARATION...
//	ledger-declare digest DECLARATION
//
// render checks each declaration, generates its tier table, its JSON Schema
// and one Cedar schema for all of them, checks the Cedar schema with
// cedar-go and the JSON Schemas with santhosh-tekuri/jsonschema, and
// writes them to DIR (default "."): <action>.tiers.json,
// <action>.schema.json and actions.cedarschema.
//
// Exit status: 0 on success, 1 when a declaration is refused, 2 on bad
// usage or unreadable input.
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
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/x/exp/schema"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/internal/declfile"
)

const usage = `Usage:
    ledger-declare render [--out DIR] DECLARATION...
    ledger-declare report [--json] DECLARATION...
    ledger-declare digest DECLARATION

Commands:
    render    Check the declarations and write, for review, each action's
              tier table with its applied-tiers digest (<action>.tiers.json),
              the JSON Schema of its wire attributes (<action>.schema.json),
              and one Cedar schema for all the actions (actions.cedarschema).
              The Cedar schema is checked with cedar-go and the JSON
              Schemas with a 2020-12 validator before anything is written.
    report    The leakage report: per action and in total, which fields
              cross raw (policy), only as projections (derived) or never
              (payload).
    digest    Print a declaration's applied-tiers digest and action
              definition digest.

Exit status: 0 success, 1 a declaration refused, 2 bad usage or unreadable
input.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errRefused marks a refused declaration (exit status 1).
var errRefused = errors.New("refused")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "render":
		err = render(args[1:], stdout)
	case "report":
		err = report(args[1:], stdout)
	case "digest":
		err = digest(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ledger-declare: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errRefused):
		fmt.Fprintf(stderr, "ledger-declare: %s\n", escape(err.Error()))
		return 1
	case errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintf(stderr, "ledger-declare: %s\n", escape(err.Error()))
		return 2
	}
}

// escape writes each character of s that strconv.IsPrint refuses as its Go
// escape (\x1b, \u202e): an error may repeat a declaration's text or a
// file name, which must not put control characters on the terminal.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s { // invalid UTF-8 becomes U+FFFD
		if strconv.IsPrint(r) {
			b.WriteRune(r)
		} else {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// load reads and checks declaration files, sorted by action; two files for
// one action are refused.
func load(paths []string) ([]*declare.Declaration, error) {
	if len(paths) == 0 {
		return nil, errors.New("no declaration file given")
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

func render(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	out := fs.String("out", ".", "directory to write the artifacts to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	decls, err := load(fs.Args())
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
	Action  string   `json:"action"`
	Raw     []string `json:"raw"`
	Derived []string `json:"derived"` // "field (projection, …)"
	Never   []string `json:"never"`
}

func report(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "machine-readable output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	decls, err := load(fs.Args())
	if err != nil {
		return err
	}
	var rows []leakage
	var raw, derived, never int
	for _, d := range decls {
		row := leakage{Action: d.Action, Raw: []string{}, Derived: []string{}, Never: []string{}}
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
		fmt.Fprintf(stdout, "| %s | %d | %s | %s | %s |\n", r.Action, len(r.Raw)+len(r.Derived)+len(r.Never),
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

func digest(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("digest takes one declaration file")
	}
	decls, err := load(args)
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
	return nil
}
