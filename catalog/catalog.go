// Package catalog is ledgerd's action catalog: the declarations
// (docs/declarations.md) of the actions a ledger accepts, read from one
// directory, and the check of an append's attributes against them.
// docs/declarations.md and docs/api.md ("With an action catalog") are the
// specification; this is its short form.
//
// # Directory
//
// A catalog is one directory. Every file whose name ends in ".json" is read
// as a declaration, in byte order of name; other files are ignored. Load
// refuses, naming the file and, for a declaration that does not parse, the
// JSON pointer of the fault:
//
//   - a directory with no ".json" file
//     ("catalog_dir <dir> holds no declaration (*.json)");
//   - a file that is not a declaration (declare.Parse's refusal);
//   - two files that declare one action ("<a> and <b> both declare action
//     <action>");
//   - an unreviewed draft, a file with "reviewed": false
//     ("catalog: <file>: declare: action <action>: /reviewed: an unreviewed
//     draft ("reviewed": false) is not served: review it, then remove the
//     member").
//
// # Actions
//
// Each Action holds its declaration, the file's bytes exactly as read
// (ledgerd serves them at /v1/actions/{action}, so that an auditor can
// recompute the digests), the applied-tiers digest
// (declare.Declaration.TiersDigest), the action definition digest
// (declare.Declaration.Digest), and the JSON Schema the declaration
// generates for its wire attributes (declare.Declaration.JSONSchema),
// compiled.
//
// # Attributes
//
// Action.CheckAttributes accepts exactly the attributes the schema admits:
// the policy fields and the derived fields, each of the latter an object
// holding exactly its projections; no payload field, no raw derived value,
// no member the declaration does not have. A refusal lists every fault, at
// most 8 and then "and N more", joined by "; ", sorted by where each is
// (a member the declaration does not have after the declared ones). Each
// fault names the attribute by a JSON pointer into the attributes made of
// declared names and list indices, the rule it broke, and the declared
// field with its tier and projections:
//
//	attribute /payee: required, missing (declared field payee, derived tier, projections payee_known)
//	attribute /body/byte_size: must be at least 0 (declared field body, projection byte_size)
//	attribute /memo: a payload field never crosses; leave it out (declared field memo, payload tier)
//
// A member the declaration does not have is named by its position, from 0
// in the order sent, never by its name ("an attribute the declaration does
// not have, at index 3 of the attributes", "a member the declaration does
// not have, at index 0 of /payee"). No value is ever repeated.
package catalog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/internal/declfile"
)

// Catalog is the declared actions, by action name. With a catalog, ledgerd
// appends only a declared action, with attributes its declaration's schema
// accepts (Action.CheckAttributes) and its applied-tiers digest; the entry
// then records the action definition digest.
type Catalog map[string]*Action

// Action is one declared action.
type Action struct {
	decl       *declare.Declaration
	file       []byte
	tiers      commit.Digest
	definition commit.Digest
	schema     *jsonschema.Schema
}

// Declaration returns the action's declaration.
func (a *Action) Declaration() *declare.Declaration { return a.decl }

// File returns the declaration file's bytes, exactly as read. The caller
// must not modify them.
func (a *Action) File() []byte { return a.file }

// TiersDigest returns the declaration's applied-tiers digest.
func (a *Action) TiersDigest() commit.Digest { return a.tiers }

// DefinitionDigest returns the declaration's action definition digest.
func (a *Action) DefinitionDigest() commit.Digest { return a.definition }

// Load reads every *.json file in dir as a declaration. It refuses an
// empty directory, a declaration that does not parse, two files for one
// action, and an unreviewed draft (a file with "reviewed": false,
// declare.DraftFromInputSchema's output before a person reviewed it).
func Load(dir string) (Catalog, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("catalog_dir %s holds no declaration (*.json)", dir)
	}
	sort.Strings(files)
	read, err := declfile.Read(files)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	c := Catalog{}
	for _, df := range read {
		f, d := df.Path, df.Decl
		if !d.Reviewed() {
			return nil, fmt.Errorf("catalog: %s: %w", f, &declare.Error{Action: d.Action, Pointer: "/reviewed",
				Problem: `an unreviewed draft ("reviewed": false) is not served: review it, then remove the member`})
		}
		a := &Action{decl: d, file: df.Data}
		if a.tiers, err = d.TiersDigest(); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", f, err)
		}
		if a.definition, err = d.Digest(); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", f, err)
		}
		if a.schema, err = declfile.CompileSchema(d); err != nil {
			return nil, fmt.Errorf("catalog: %s: the generated JSON Schema does not compile: %w", f, err)
		}
		c[d.Action] = a
	}
	return c, nil
}

// Declarations returns the catalog's declarations, sorted by action.
func (c Catalog) Declarations() []*declare.Declaration {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	slices.Sort(names)
	decls := make([]*declare.Declaration, len(names))
	for i, name := range names {
		decls[i] = c[name].decl
	}
	return decls
}

// CheckAttributes validates attributes (canonical JSON) against the
// action's wire schema, and returns nil if it accepts them. Otherwise the
// error's text names each fault by the declared field, the projection and
// the rule that failed, and by JSON pointers (relative to the attributes)
// made of declared names and list indices. It never repeats a value, nor a
// member name the client made up: such a member is named by its position
// in request, the append request as sent, a JSON object whose member
// "attributes" holds the attributes in the order the client wrote them.
func (a *Action) CheckAttributes(attributes, request []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(attributes))
	if err != nil {
		return errors.New("the attributes are not JSON")
	}
	return a.CheckAttributeValue(v, request)
}

// CheckAttributeValue is CheckAttributes for attributes already decoded,
// as encoding/json decodes them with UseNumber (commit.Value.Any), so that
// a request's attributes are parsed once.
func (a *Action) CheckAttributeValue(v any, request []byte) error {
	err := a.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return errors.New("the attributes do not match the declaration")
	}
	var found []attributeProblem
	for _, leaf := range validationLeaves(ve, nil) {
		found = append(found, a.attributeProblems(leaf, request)...)
	}
	// The validator reports in map order: sort, for one answer per request.
	slices.SortFunc(found, func(x, y attributeProblem) int {
		return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.text, y.text))
	})
	var problems []string
	for _, p := range found {
		problems = append(problems, p.text)
	}
	problems = slices.Compact(problems)
	if len(problems) == 0 {
		return errors.New("the attributes do not match the declaration")
	}
	if n := len(problems) - maxAttributeProblems; n > 0 {
		problems = append(problems[:maxAttributeProblems], fmt.Sprintf("and %d more", n))
	}
	return errors.New(strings.Join(problems, "; "))
}

// maxAttributeProblems bounds the faults one refusal lists.
const maxAttributeProblems = 8

// validationLeaves appends to list the errors of ve's tree that have no
// causes: the failed rules themselves.
func validationLeaves(ve *jsonschema.ValidationError, list []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return append(list, ve)
	}
	for _, c := range ve.Causes {
		list = validationLeaves(c, list)
	}
	return list
}

// attributeProblem is one fault in attributes, and where it is for
// sorting: a pointer of declared names, with "/~" after a parent's for a
// member the declaration does not have.
type attributeProblem struct{ at, text string }

// attributeProblems describes one failed rule of the generated schema
// (declare.JSONSchema) in the declaration's terms. The schema admits, at
// the top level, only the policy and derived fields; in a derived field,
// only its projections; so every location token that reaches here is a
// declared name, or a list index below a string_list field. The names in
// AdditionalProperties are the client's: only those that are names of the
// declaration are repeated.
func (a *Action) attributeProblems(leaf *jsonschema.ValidationError, request []byte) []attributeProblem {
	loc := leaf.InstanceLocation
	var out []attributeProblem
	add := func(at, format string, args ...any) {
		out = append(out, attributeProblem{at, fmt.Sprintf(format, args...)})
	}
	if len(loc) == 0 {
		switch k := leaf.ErrorKind.(type) {
		case *kind.Type:
			add("", "the attributes must be a JSON object")
		case *kind.Required:
			for _, name := range k.Missing {
				f, _ := a.decl.Field(name)
				add("/"+name, "attribute /%s: required, missing (%s)", name, fieldContext(f))
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				at := "/~"
				if a.declares(name) {
					at = "/" + name
				}
				add(at, "%s", a.extraAttribute(name, request))
			}
		default:
			add("", "the attributes do not match the declaration")
		}
		return out
	}
	f, declared := a.decl.Field(loc[0])
	if !declared || f.Tier == tier.Payload {
		// Not reached: the schema validates declared fields only.
		add("/~", "an attribute does not match the declaration")
		return out
	}
	switch {
	case len(loc) == 1:
		switch k := leaf.ErrorKind.(type) {
		case *kind.Required:
			for _, p := range k.Missing {
				add("/"+f.Name+"/"+p, "attribute /%s/%s: required, missing (declared field %s, projection %s)", f.Name, p, f.Name, p)
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				add("/"+f.Name+"/~", "a member the declaration does not have, %s of /%s (%s)",
					position(request, []string{"attributes", f.Name}, name), f.Name, fieldContext(f))
			}
		default:
			add("/"+f.Name, "attribute /%s: %s (%s)", f.Name, fieldRule(leaf.ErrorKind, f), fieldContext(f))
		}
	case len(loc) == 2 && f.Tier == tier.Derived && slices.Contains(f.Projections, loc[1]):
		add("/"+f.Name+"/"+loc[1], "attribute /%s/%s: %s (declared field %s, projection %s)",
			f.Name, loc[1], rule(leaf.ErrorKind, loc[1]), f.Name, loc[1])
	case len(loc) == 2 && f.Type == declare.StringList && isListIndex(loc[1]):
		add(fmt.Sprintf("/%s/%020s", f.Name, loc[1]), "attribute /%s/%s: %s (%s)", f.Name, loc[1], rule(leaf.ErrorKind, ""), fieldContext(f))
	default:
		add("/"+f.Name, "attribute /%s does not match its declaration (%s)", f.Name, fieldContext(f))
	}
	return out
}

// extraAttribute describes a top-level attribute the schema does not
// admit. Its name is repeated only when the declaration has it: a payload
// field, or a derived field's projection sent outside its field.
func (a *Action) extraAttribute(name string, request []byte) string {
	if _, ok := a.decl.Field(name); ok {
		return fmt.Sprintf("attribute /%s: a payload field never crosses; leave it out (declared field %s, payload tier)", name, name)
	}
	for _, f := range a.decl.Fields {
		if f.Tier == tier.Derived && slices.Contains(f.Projections, name) {
			return fmt.Sprintf("attribute /%s: %s is a projection of field %s, sent inside it as /%s/%s (%s)",
				name, name, f.Name, f.Name, name, fieldContext(f))
		}
	}
	return "an attribute the declaration does not have, " + position(request, []string{"attributes"}, name) + " of the attributes"
}

// declares reports whether name is one of the declaration's field or
// projection names.
func (a *Action) declares(name string) bool {
	for _, f := range a.decl.Fields {
		if f.Name == name || slices.Contains(f.Projections, name) {
			return true
		}
	}
	return false
}

// position says where the member name of the object at path in body is:
// its index, from 0, in the order sent.
func position(body []byte, path []string, name string) string {
	if i := commit.MemberPosition(body, path, name); i >= 0 {
		return fmt.Sprintf("at index %d", i)
	}
	return "at an index"
}

// fieldContext names a declared field and its tier, and a derived
// field's projections.
func fieldContext(f declare.Field) string {
	if f.Tier == tier.Derived {
		return fmt.Sprintf("declared field %s, derived tier, projections %s", f.Name, strings.Join(f.Projections, ", "))
	}
	return fmt.Sprintf("declared field %s, %s tier", f.Name, f.Tier)
}

// fieldRule is the rule a declared field's value broke.
func fieldRule(k jsonschema.ErrorKind, f declare.Field) string {
	if _, ok := k.(*kind.Type); ok {
		switch {
		case f.Tier == tier.Derived:
			return "must be an object holding exactly its projections"
		case f.Type == declare.StringList:
			return "must be an array of strings"
		}
	}
	return rule(k, "")
}

// rule is the rule a value broke, from the schema's side of k (never the
// value's): a type, a bound, the routes of route_shape (projection).
func rule(k jsonschema.ErrorKind, projection string) string {
	switch k := k.(type) {
	case *kind.Type:
		var want []string
		for _, t := range k.Want {
			article := "a "
			if strings.ContainsRune("aeiou", rune(t[0])) {
				article = "an "
			}
			want = append(want, article+t)
		}
		return "must be " + strings.Join(want, " or ")
	case *kind.Minimum:
		return "must be at least " + k.Want.RatString()
	case *kind.Maximum:
		return "must be at most " + k.Want.RatString()
	case *kind.Enum:
		if projection == "route_shape" {
			return `must be one of the field's declared routes or "unmatched"`
		}
		return "must be one of the declared values"
	}
	return "does not match its declaration"
}

// isListIndex reports whether a location token is an array index.
func isListIndex(token string) bool {
	if token == "" {
		return false
	}
	for _, c := range token {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
