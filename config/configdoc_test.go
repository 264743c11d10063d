package config

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite the generated reference in docs/config.md from config/config.go")

const (
	configDocPath = "../docs/config.md"
	// configSource declares the config's types.
	configSource   = "config.go"
	configRefBegin = "<!-- BEGIN reference: generated from the doc comments of Config in config/config.go by TestConfigReference. Edit those, then run: go test ./config/ -run TestConfigReference -update-config-doc -->\n"
	configRefEnd   = "<!-- END reference -->\n"
)

// docs/config.md holds the reference generated from the doc comments of
// Config, TLSConfig and Mediator, exactly: a field added, removed, renamed
// or documented differently fails here until the doc is regenerated. Every
// field's comment must say whether it is required or optional, and an
// optional field its default.
func TestConfigReference(t *testing.T) {
	ref := configReference(t)
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := bytes.Cut(doc, []byte(configRefBegin))
	got, after, ok2 := bytes.Cut(rest, []byte(configRefEnd))
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers of the generated reference", configDocPath)
	}
	if string(got) == ref {
		return
	}
	if *updateConfigDoc {
		text := slices.Concat(before, []byte(configRefBegin), []byte(ref), []byte(configRefEnd), after)
		if err := os.WriteFile(configDocPath, text, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(ref, "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		g, w := "", ""
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("%s is out of date with config/config.go, from line %d of its reference:\n have %q\n want %q\nrun: go test ./cmd/ledgerd/ -run TestConfigReference -update-config-doc", configDocPath, i+1, g, w)
		}
	}
}

// configField is one field of a config struct, as config/config.go
// declares it.
type configField struct {
	goName, json, goType, doc string
}

// configStructs are the structs of the config file: the name of each in
// the reference, how its own doc comment begins there (none for Config,
// whose comment the hand-written part of docs/config.md replaces), and
// the reflect type the file must match.
var configStructs = []struct {
	goName, prefix, lead string
	typ                  reflect.Type
}{
	{"Config", "", "", reflect.TypeFor[Config]()},
	{"TLSConfig", "tls.", "The `tls` object", reflect.TypeFor[TLSConfig]()},
	{"Mediator", "mediators[].", "Each element of `mediators`", reflect.TypeFor[Mediator]()},
	{"ApprovalsConfig", "approvals.", "The `approvals` object", reflect.TypeFor[ApprovalsConfig]()},
	{"WitnessConfig", "witnesses[].", "Each element of `witnesses`", reflect.TypeFor[WitnessConfig]()},
	{"ClusterConfig", "cluster.", "The `cluster` object", reflect.TypeFor[ClusterConfig]()},
}

// jsonTypes names the JSON type of each Go type in the config.
var jsonTypes = map[string]string{
	"string":              "string",
	"int":                 "integer",
	"int64":               "integer",
	"float64":             "number",
	"[]string":            "array of strings",
	"*TLSConfig":          "object (`tls.*`)",
	"[]Mediator":          "array of objects (`mediators[].*`)",
	"*ApprovalsConfig":    "object (`approvals.*`)",
	"[]WitnessConfig":     "array of objects (`witnesses[].*`)",
	"*ClusterConfig":      "object (`cluster.*`)",
	"[]approver.Approver": "array of objects (docs/approvals.md §Approvers)",
}

// configReference generates the reference from config/config.go.
func configReference(t *testing.T) string {
	t.Helper()
	file, err := parser.ParseFile(gotoken.NewFileSet(), configSource, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var table, sections strings.Builder
	table.WriteString("| field | type | required? |\n| --- | --- | --- |\n")
	for _, cs := range configStructs {
		doc, fields := configStruct(t, file, cs.goName)
		// The parsed struct is the compiled one.
		var parsed, compiled []string
		for _, f := range fields {
			parsed = append(parsed, f.goName+" "+f.json)
		}
		for f := range cs.typ.Fields() {
			compiled = append(compiled, f.Name+" "+f.Tag.Get("json"))
		}
		if !slices.Equal(parsed, compiled) {
			t.Fatalf("config/config.go's %s has fields %q; the compiled one %q", cs.goName, parsed, compiled)
		}
		// Go names become the JSON names in the text.
		names := map[string]string{}
		for _, f := range fields {
			names[f.goName] = "`" + cs.prefix + f.json + "`"
		}
		if cs.lead != "" {
			names[cs.goName] = cs.lead
			sections.WriteString("## `" + strings.TrimSuffix(strings.TrimSuffix(cs.prefix, "."), "[]") + "`\n\n")
			sections.WriteString(docMarkdown(doc, names))
		}
		for _, f := range fields {
			typ, ok := jsonTypes[f.goType]
			if !ok {
				t.Fatalf("config/config.go: %s.%s has type %s, which the reference does not know", cs.goName, f.goName, f.goType)
			}
			need := "optional"
			if regexp.MustCompile(`(^|\. )Required[.,;]`).MatchString(f.doc) {
				need = "required"
			} else if !strings.Contains(f.doc, "Optional") {
				t.Errorf("config/config.go: the comment of %s.%s says neither Required nor Optional", cs.goName, f.goName)
			} else if !strings.Contains(f.doc, "default") {
				t.Errorf("config/config.go: the comment of optional %s.%s gives no default", cs.goName, f.goName)
			}
			fmt.Fprintf(&table, "| `%s%s` | %s | %s |\n", cs.prefix, f.json, typ, need)
			fmt.Fprintf(&sections, "### `%s%s`\n\n%s, %s.\n\n%s", cs.prefix, f.json, typ, need, docMarkdown(f.doc, names))
		}
	}
	return "## Summary\n\n" + table.String() + "\n## Fields\n\n" + sections.String()
}

// configStruct parses the struct name of config/config.go.
func configStruct(t *testing.T, file *ast.File, name string) (doc string, fields []configField) {
	t.Helper()
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != gotoken.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			if ts.Name.Name != name {
				continue
			}
			for _, f := range ts.Type.(*ast.StructType).Fields.List {
				if len(f.Names) != 1 || f.Tag == nil || f.Doc == nil {
					t.Fatalf("config/config.go: a field of %s without its own doc comment or json tag", name)
				}
				tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
				fields = append(fields, configField{f.Names[0].Name, tag, exprString(f.Type), f.Doc.Text()})
			}
			return gd.Doc.Text(), fields
		}
	}
	t.Fatalf("config/config.go declares no %s", name)
	return "", nil
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

var goWord = regexp.MustCompile(`[.\w]*\w`)

// docMarkdown turns a doc comment into Markdown paragraphs, one line each
// (so that no wrapped line can start a list), with the Go names in names
// replaced (not in a qualified name such as ledger.Options.X) and
// asterisks escaped.
func docMarkdown(doc string, names map[string]string) string {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(doc), "\n\n") {
		text := strings.Join(strings.Fields(para), " ")
		text = goWord.ReplaceAllStringFunc(text, func(w string) string {
			if r, ok := names[w]; ok {
				return r
			}
			return w
		})
		b.WriteString(strings.ReplaceAll(text, "*", "\\*") + "\n\n")
	}
	return b.String()
}
