// Package declare reads an action's declaration — for each of its
// parameter fields a type and a tier, and for derived fields the
// projections that produce attributes — and from it derives everything
// that must agree: the tier table and its applied-tiers digest (package
// tier), the minimized attributes of a call (Minimize), the Cedar schema of
// the attributes a policy sees (CedarSchema) and the JSON Schema of the
// attributes on the wire (JSONSchema). docs/declarations.md is the
// specification of the file format; this is its summary.
//
// A declaration is one JSON object per action, in the strict domain of
// package commit, with no member but these:
//
//	{
//	  "declaration": 1,                       // format version, required
//	  "action": "send_email",                 // required
//	  "description": "…",                     // optional
//	  "reviewed": false,                      // optional: an unreviewed draft; only false may be written
//	  "tool": {                               // optional: the MCP tool the action is pinned to
//	    "server": "fs", "name": "write_file", // action is then exactly "fs.write_file"
//	    "definition_digest": "sha256:…"       // the upstream tool definition's digest
//	  },
//	  "fields": {                             // required; empty ({}) only with "tool"
//	    "recipient": {
//	      "type": "string",                   // string | integer | boolean | string_list | json (payload only)
//	      "tier": "derived",                  // policy | derived | payload
//	      "projections": ["recipient_domain"],// derived only, at least one
//	      "optional": false,                  // may the field be absent? default false
//	      "routes": ["/v1/x/{id}"],           // with route_shape only, required there
//	      "allowlist": "payees",              // with payee_known only, required there
//	      "description": "…"                  // optional
//	    }
//	  }
//	}
//
// Field names are ASCII letters (either case), digits and '_', starting
// with a letter (Cedar identifiers: "dryRun" is read as context.dryRun);
// action names are dot-separated parts of ASCII letters, digits, '_' and
// '-', each starting with a letter ("everything.get-sum"); both at most 64
// bytes. A field the declaration does not name — among them any argument
// whose name the field rule refuses ("dry-run") — is unclassified: it
// reaches only the parameter digest, like a payload field.
//
// The minimized attributes of a call are a JSON object: a policy field's
// raw value under its name; for a derived field, an object under its name
// holding one member per projection (so "recipient" becomes
// {"recipient":{"recipient_domain":"example.com"}}); nothing for payload
// and unclassified fields, nor for an optional field that is absent.
package declare

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/tier"
)

// Version is the declaration format this package reads.
const Version = 1

// DomainSeparator prefixes the canonical declaration in its digest, the
// action definition digest.
const DomainSeparator = "ledger/v1/action\n"

// Type is a parameter field's JSON type.
type Type string

const (
	String     Type = "string"
	Integer    Type = "integer" // within ±(2^53−1), as the strict domain requires
	Boolean    Type = "boolean"
	StringList Type = "string_list" // an array of strings
	// JSON is any JSON value of the strict domain (null, a number, an
	// object, …). Only a payload field may have it: nothing of it
	// crosses, so no policy or projection has to know its shape.
	JSON Type = "json"
)

// Bounds on a declaration.
const (
	MaxFields        = 256
	MaxNameBytes     = 64 // a field's, an action's, a tool's server
	MaxRoutes        = 256
	MaxToolNameBytes = 1024
)

// Field is one declared parameter field.
type Field struct {
	Name        string
	Type        Type
	Tier        tier.Tier
	Projections []string // sorted; derived fields only
	Optional    bool
	Routes      []string // route_shape templates, in declared order (the first match wins)
	Allowlist   string   // payee_known's list name
	Description string
}

// Declaration is one action's declaration, checked.
type Declaration struct {
	Action      string
	Description string
	Fields      []Field // sorted by name; empty only for a tool's action
	// Tool, if set, pins the action to one upstream MCP tool: Action is
	// then Tool.Server + "." + Tool.Name.
	Tool *Tool
	// Unreviewed is set when the file says "reviewed": false: a draft a
	// generator wrote (DraftFromInputSchema) that no person has reviewed
	// yet. The zero value is a reviewed declaration, as a file without the
	// member is.
	Unreviewed bool
}

// Tool is the upstream MCP tool an action's declaration is pinned to.
type Tool struct {
	// Server is the gateway's name for the upstream server: an action
	// part (ASCII letters, digits, '_' and '-', starting with a letter).
	Server string
	// Name is the tool's own name, as the server lists it.
	Name string
	// DefinitionDigest is the digest of the upstream tool's definition,
	// as the gateway computes it; never zero.
	DefinitionDigest commit.Digest
}

// Reviewed reports whether a person has reviewed the declaration: false
// for a draft that still carries "reviewed": false. ledgerd's catalog
// refuses an unreviewed declaration.
func (d *Declaration) Reviewed() bool { return !d.Unreviewed }

// Error is a declaration or a call refused: Pointer is an RFC 6901 JSON
// pointer into the declaration file ("/fields/recipient/tier") or into the
// call's parameters ("/recipient"). It never holds a parameter's value.
type Error struct {
	Action  string
	Pointer string
	// Code classifies the refusal with a stable string (the Code…
	// constants, or CodeDomainPrefix and a commit.Kind), shared by every
	// implementation through the conformance corpus (docs/conformance.md).
	// Problem is for people and may change.
	Code    string
	Problem string
	Err     error // the underlying error, if any (a *commit.DomainError, a *project.Error)
}

// The codes of an *Error. They are part of the conformance corpus
// (docs/conformance.md): a code is never renamed or reused.
const (
	// CodeDeclarationInvalid: Parse refused the declaration file; Pointer
	// is into the declaration.
	CodeDeclarationInvalid = "declaration_invalid"
	// CodeDomainPrefix, followed by a commit.Kind ("domain:duplicate_key"):
	// the call's parameters are outside the strict domain. Pointer names
	// the declared field holding the fault, "" for the whole document, or
	// "(an undeclared field)".
	CodeDomainPrefix = "domain:"
	// CodeFieldAbsent: a declared field that is not optional is absent.
	CodeFieldAbsent = "field_absent"
	// CodeFieldType: a declared field's value is not of its type.
	CodeFieldType = "field_type"
	// CodeProjectionRefused: a projection refused a derived field's value
	// (fail closed); Err is the *project.Error.
	CodeProjectionRefused = "projection_refused"
	// CodeFloorExceeded: the declaration gives a field a tier past the
	// workload's Floor (or the floor names an unknown tier).
	CodeFloorExceeded = "floor_exceeded"
	// CodeDraftRefused: DraftFromInputSchema refused its input.
	CodeDraftRefused = "draft_refused"
	// CodeUndeclared: a field the declaration does not name
	// (FieldAttribute).
	CodeUndeclared = "field_undeclared"
	// CodeOpeningMissing: the openings given (an earlier call's
	// disclosure) have none for a field of these parameters: they are not
	// the parameters committed to before.
	CodeOpeningMissing = "opening_missing"
	// CodeInternal: a failure that valid input cannot cause.
	CodeInternal = "internal"
)

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("declare: ")
	if e.Action != "" {
		fmt.Fprintf(&b, "action %s: ", e.Action)
	}
	if e.Pointer != "" {
		fmt.Fprintf(&b, "%s: ", e.Pointer)
	}
	b.WriteString(e.Problem)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// projection is what a projection takes and gives.
type projection struct {
	input  Type
	output Type
}

// projections are the projections a declaration may name (package
// project implements them).
var projections = map[string]projection{
	"recipient_domain": {String, String},
	"payee_known":      {String, Boolean},
	"endpoint_host":    {String, String},
	"route_shape":      {String, String},
	"resource_dir":     {String, String},
	"byte_size":        {String, Integer},
	"count":            {StringList, Integer},
}

var (
	fieldName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	actionPart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	actionName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$`)
	routeVar   = regexp.MustCompile(`^\{[a-z][a-z0-9_]*\}$`)
)

// IsFieldName reports whether name may name a declared field: ASCII
// letters (either case), digits and '_', starting with a letter, at most
// MaxNameBytes. A parameter whose name is not one cannot be declared; it
// is unclassified, so it reaches only the parameter digest.
func IsFieldName(name string) bool { return len(name) <= MaxNameBytes && fieldName.MatchString(name) }

// IsActionName reports whether name may name an action: dot-separated
// parts of ASCII letters (either case), digits, '_' and '-', each starting
// with a letter, at most MaxNameBytes in all.
func IsActionName(name string) bool { return len(name) <= MaxNameBytes && actionName.MatchString(name) }

// IsActionPart reports whether s may be one part of an action name (no
// dot): a tool's server, and the name of a tool that can be declared.
func IsActionPart(s string) bool { return len(s) <= MaxNameBytes && actionPart.MatchString(s) }

// file is a declaration as written.
type file struct {
	Declaration int                  `json:"declaration"`
	Action      string               `json:"action"`
	Description string               `json:"description"`
	Fields      map[string]fileField `json:"fields"`
	Tool        *fileTool            `json:"tool"`
	Reviewed    json.RawMessage      `json:"reviewed"` // "false" or absent; null and true are refused
}

type fileTool struct {
	Server           string `json:"server"`
	Name             string `json:"name"`
	DefinitionDigest string `json:"definition_digest"`
}

type fileField struct {
	Type        string   `json:"type"`
	Tier        string   `json:"tier"`
	Projections []string `json:"projections"`
	Optional    bool     `json:"optional"`
	Routes      []string `json:"routes"`
	Allowlist   string   `json:"allowlist"`
	Description string   `json:"description"`
}

// Parse reads a declaration file. It refuses, with an *Error naming where,
// input outside the strict JSON domain, unknown or missing members, an
// unsupported version, and every rule of the format.
func Parse(data []byte) (*Declaration, error) {
	if _, err := commit.Canonicalize(data); err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return nil, &Error{Pointer: de.Pointer, Code: CodeDeclarationInvalid, Problem: "not in the strict JSON domain: " + string(de.Kind), Err: err}
		}
		return nil, &Error{Pointer: "", Code: CodeDeclarationInvalid, Problem: "not in the strict JSON domain", Err: err}
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &Error{Pointer: "", Code: CodeDeclarationInvalid, Problem: decodeProblem(err), Err: err}
	}
	return f.check()
}

// decodeProblem describes an encoding/json error by the member it is about.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "not a declaration object"
		}
		return fmt.Sprintf("member %q is not a JSON %s", te.Field, te.Type.Kind())
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown member " + msg
	}
	return "not a declaration object"
}

func (f *file) check() (*Declaration, error) {
	fail := func(pointer, format string, args ...any) error {
		return &Error{Action: f.Action, Pointer: pointer, Code: CodeDeclarationInvalid, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.Declaration == 0:
		return nil, fail("/declaration", "missing")
	case f.Declaration != Version:
		return nil, fail("/declaration", "version %d; this reader knows version %d", f.Declaration, Version)
	case f.Action == "":
		return nil, fail("/action", "missing")
	case !IsActionName(f.Action):
		return nil, fail("/action", "not a name of dot-separated parts, each ASCII letters, digits, '_' and '-' starting with a letter (at most %d bytes)", MaxNameBytes)
	}
	d := &Declaration{Action: f.Action, Description: f.Description}
	switch string(f.Reviewed) {
	case "":
	case "false":
		d.Unreviewed = true
	default:
		return nil, fail("/reviewed", `only false may be written (an unreviewed draft); remove the member once the declaration is reviewed`)
	}
	if f.Tool != nil {
		t, err := f.Tool.check(f.Action, fail)
		if err != nil {
			return nil, err
		}
		d.Tool = t
	}
	switch {
	case f.Fields == nil:
		return nil, fail("/fields", "missing")
	case len(f.Fields) == 0 && d.Tool == nil:
		return nil, fail("/fields", "empty: only the declaration of a tool (with \"tool\") may have no field")
	case len(f.Fields) > MaxFields:
		return nil, fail("/fields", "more than %d fields", MaxFields)
	}
	d.Fields = []Field{}
	// Fields are checked in byte order of name, so that a declaration
	// with several faults is refused at the same one on every run (and
	// by every implementation), not at the one map order reaches first.
	for _, name := range slices.Sorted(maps.Keys(f.Fields)) {
		ff := f.Fields[name]
		p := "/fields/" + escapePointer(name)
		if !IsFieldName(name) {
			return nil, fail(p, "not a field name: ASCII letters, digits and '_', starting with a letter (at most %d bytes)", MaxNameBytes)
		}
		field := Field{Name: name, Type: Type(ff.Type), Tier: tier.Tier(ff.Tier), Optional: ff.Optional,
			Routes: ff.Routes, Allowlist: ff.Allowlist, Description: ff.Description}
		switch field.Type {
		case String, Integer, Boolean, StringList, JSON:
		case "":
			return nil, fail(p+"/type", "missing")
		default:
			return nil, fail(p+"/type", "not string, integer, boolean, string_list or json")
		}
		if field.Type == JSON && (field.Tier == tier.Policy || field.Tier == tier.Derived) {
			return nil, fail(p+"/tier", "a json field must be payload: no policy or projection reads a value of any shape")
		}
		switch field.Tier {
		case tier.Policy, tier.Payload:
			if len(ff.Projections) != 0 {
				return nil, fail(p+"/projections", "only derived fields have projections")
			}
		case tier.Derived:
			if len(ff.Projections) == 0 {
				return nil, fail(p+"/projections", "a derived field needs at least one projection")
			}
		case "":
			return nil, fail(p+"/tier", "missing")
		default:
			return nil, fail(p+"/tier", "not policy, derived or payload")
		}
		for i, name := range ff.Projections {
			spec, ok := projections[name]
			switch {
			case !ok:
				return nil, fail(fmt.Sprintf("%s/projections/%d", p, i), "unknown projection")
			case spec.input != field.Type:
				return nil, fail(fmt.Sprintf("%s/projections/%d", p, i), "%s takes a %s field, not %s", name, spec.input, field.Type)
			case slices.Contains(ff.Projections[:i], name):
				return nil, fail(fmt.Sprintf("%s/projections/%d", p, i), "repeated")
			}
		}
		field.Projections = slices.Sorted(slices.Values(ff.Projections))
		if err := checkRoutes(field, p, fail); err != nil {
			return nil, err
		}
		switch has := slices.Contains(field.Projections, "payee_known"); {
		case has && field.Allowlist == "":
			return nil, fail(p+"/allowlist", "payee_known needs the name of an allowlist")
		case !has && field.Allowlist != "":
			return nil, fail(p+"/allowlist", "only a field projected by payee_known names an allowlist")
		}
		d.Fields = append(d.Fields, field)
	}
	slices.SortFunc(d.Fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	return d, nil
}

// check checks the tool pin of a declaration of action.
func (ft *fileTool) check(action string, fail func(string, string, ...any) error) (*Tool, error) {
	switch {
	case ft.Server == "":
		return nil, fail("/tool/server", "missing")
	case !IsActionPart(ft.Server):
		return nil, fail("/tool/server", "not ASCII letters, digits, '_' and '-', starting with a letter (at most %d bytes)", MaxNameBytes)
	case ft.Name == "":
		return nil, fail("/tool/name", "missing")
	case len(ft.Name) > MaxToolNameBytes:
		return nil, fail("/tool/name", "more than %d bytes", MaxToolNameBytes)
	case strings.ContainsFunc(ft.Name, unicode.IsControl):
		return nil, fail("/tool/name", "holds a control character")
	case !IsActionPart(ft.Name):
		return nil, fail("/tool/name", "a tool whose name is not ASCII letters, digits, '_' and '-', starting with a letter (at most %d bytes), cannot be declared", MaxNameBytes)
	case ft.DefinitionDigest == "":
		return nil, fail("/tool/definition_digest", "missing")
	}
	dd, err := commit.ParseDigest(ft.DefinitionDigest)
	if err != nil {
		return nil, fail("/tool/definition_digest", "not \"sha256:\" and 64 lower-case hex digits")
	}
	if dd == (commit.Digest{}) {
		return nil, fail("/tool/definition_digest", "all zeros")
	}
	if want := ft.Server + "." + ft.Name; action != want {
		return nil, fail("/action", "a tool's action must be its server and name joined by '.' (%s)", want)
	}
	return &Tool{Server: ft.Server, Name: ft.Name, DefinitionDigest: dd}, nil
}

func checkRoutes(field Field, p string, fail func(string, string, ...any) error) error {
	has := slices.Contains(field.Projections, "route_shape")
	switch {
	case has && len(field.Routes) == 0:
		return fail(p+"/routes", "route_shape needs the action's route templates")
	case !has && len(field.Routes) != 0:
		return fail(p+"/routes", "only a field projected by route_shape has routes")
	case len(field.Routes) > MaxRoutes:
		return fail(p+"/routes", "more than %d routes", MaxRoutes)
	}
	for i, r := range field.Routes {
		rp := fmt.Sprintf("%s/routes/%d", p, i)
		if !strings.HasPrefix(r, "/") || len(r) > 1024 {
			return fail(rp, "not a path template starting with '/'")
		}
		for _, seg := range strings.Split(r[1:], "/") {
			if seg == "" && r != "/" || strings.ContainsAny(seg, "{}") && !routeVar.MatchString(seg) ||
				strings.ContainsAny(seg, "?#%\\ ") {
				return fail(rp, "segments must be literals or {name}, without '?', '#', '%', '\\' or spaces")
			}
		}
		if slices.Contains(field.Routes[:i], r) {
			return fail(rp, "repeated")
		}
	}
	return nil
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// TierTable returns the declaration's tier table.
func (d *Declaration) TierTable() tier.Table {
	t := tier.Table{Action: d.Action}
	for _, f := range d.Fields {
		t.Fields = append(t.Fields, tier.Field{Name: f.Name, Tier: f.Tier, Projections: slices.Clone(f.Projections)})
	}
	return t
}

// TiersDigest returns the applied-tiers digest of the declaration's tier
// table.
func (d *Declaration) TiersDigest() (commit.Digest, error) { return d.TierTable().Digest() }

// Canonical returns the declaration in canonical form: the JCS of the file
// object with every member written out (optional false, empty lists and
// strings included) and projections sorted; "tool" and "reviewed" only
// when the declaration has them (a tool pin, an unreviewed draft), so
// that a declaration without them keeps the canonical form it had before
// they existed. Two files that declare the same thing have the same
// canonical form.
func (d *Declaration) Canonical() ([]byte, error) {
	fields := map[string]any{}
	for _, f := range d.Fields {
		fields[f.Name] = map[string]any{
			"type": string(f.Type), "tier": string(f.Tier), "projections": strings2any(f.Projections),
			"optional": f.Optional, "routes": strings2any(f.Routes), "allowlist": f.Allowlist,
			"description": f.Description,
		}
	}
	obj := map[string]any{
		"declaration": Version, "action": d.Action, "description": d.Description, "fields": fields,
	}
	if d.Tool != nil {
		obj["tool"] = map[string]any{
			"server": d.Tool.Server, "name": d.Tool.Name, "definition_digest": d.Tool.DefinitionDigest.String(),
		}
	}
	if d.Unreviewed {
		obj["reviewed"] = false
	}
	return commit.CanonicalizeValue(obj)
}

// Digest returns the action definition digest: SHA-256 of DomainSeparator
// and the canonical declaration. Unlike the applied-tiers digest it also
// covers types, optionality, routes, allowlist names and descriptions, and
// the tool pin and the review marker when the file has them.
func (d *Declaration) Digest() (commit.Digest, error) {
	c, err := d.Canonical()
	if err != nil {
		return commit.Digest{}, err
	}
	return sha256.Sum256(append([]byte(DomainSeparator), c...)), nil
}

func strings2any(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Field returns the declared field named name.
func (d *Declaration) Field(name string) (Field, bool) {
	i, ok := slices.BinarySearchFunc(d.Fields, name, func(f Field, name string) int { return strings.Compare(f.Name, name) })
	if !ok {
		return Field{}, false
	}
	return d.Fields[i], true
}
