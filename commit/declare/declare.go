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
//	  "fields": {                             // required, at least one
//	    "recipient": {
//	      "type": "string",                   // string | integer | boolean | string_list
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
// Field and action names are lower-case ASCII identifiers (action names may
// also hold dots). A field the declaration does not name is unclassified:
// it reaches only the parameter digest, like a payload field.
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
	"regexp"
	"slices"
	"strings"

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
)

// Bounds on a declaration.
const (
	MaxFields    = 256
	MaxNameBytes = 64
	MaxRoutes    = 256
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
	Fields      []Field // sorted by name
}

// Error is a declaration or a call refused: Pointer is an RFC 6901 JSON
// pointer into the declaration file ("/fields/recipient/tier") or into the
// call's parameters ("/recipient"). It never holds a parameter's value.
type Error struct {
	Action  string
	Pointer string
	Problem string
	Err     error // the underlying error, if any (a *commit.DomainError, a *project.Error)
}

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
	fieldName  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	actionName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	routeVar   = regexp.MustCompile(`^\{[a-z][a-z0-9_]*\}$`)
)

// file is a declaration as written.
type file struct {
	Declaration int                  `json:"declaration"`
	Action      string               `json:"action"`
	Description string               `json:"description"`
	Fields      map[string]fileField `json:"fields"`
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
			return nil, &Error{Pointer: de.Pointer, Problem: "not in the strict JSON domain: " + string(de.Kind), Err: err}
		}
		return nil, &Error{Pointer: "", Problem: "not in the strict JSON domain", Err: err}
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &Error{Pointer: "", Problem: decodeProblem(err), Err: err}
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
		return &Error{Action: f.Action, Pointer: pointer, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.Declaration == 0:
		return nil, fail("/declaration", "missing")
	case f.Declaration != Version:
		return nil, fail("/declaration", "version %d; this reader knows version %d", f.Declaration, Version)
	case f.Action == "":
		return nil, fail("/action", "missing")
	case len(f.Action) > MaxNameBytes || !actionName.MatchString(f.Action):
		return nil, fail("/action", "not a lower-case name of letters, digits, '_' and '.' (at most %d bytes)", MaxNameBytes)
	case len(f.Fields) == 0:
		return nil, fail("/fields", "missing or empty")
	case len(f.Fields) > MaxFields:
		return nil, fail("/fields", "more than %d fields", MaxFields)
	}
	d := &Declaration{Action: f.Action, Description: f.Description}
	for name, ff := range f.Fields {
		p := "/fields/" + escapePointer(name)
		if len(name) > MaxNameBytes || !fieldName.MatchString(name) {
			return nil, fail(p, "not a lower-case field name of letters, digits and '_' (at most %d bytes)", MaxNameBytes)
		}
		field := Field{Name: name, Type: Type(ff.Type), Tier: tier.Tier(ff.Tier), Optional: ff.Optional,
			Routes: ff.Routes, Allowlist: ff.Allowlist, Description: ff.Description}
		switch field.Type {
		case String, Integer, Boolean, StringList:
		case "":
			return nil, fail(p+"/type", "missing")
		default:
			return nil, fail(p+"/type", "not string, integer, boolean or string_list")
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
// strings included) and projections sorted. Two files that declare the
// same thing have the same canonical form.
func (d *Declaration) Canonical() ([]byte, error) {
	fields := map[string]any{}
	for _, f := range d.Fields {
		fields[f.Name] = map[string]any{
			"type": string(f.Type), "tier": string(f.Tier), "projections": strings2any(f.Projections),
			"optional": f.Optional, "routes": strings2any(f.Routes), "allowlist": f.Allowlist,
			"description": f.Description,
		}
	}
	return commit.CanonicalizeValue(map[string]any{
		"declaration": Version, "action": d.Action, "description": d.Description, "fields": fields,
	})
}

// Digest returns the action definition digest: SHA-256 of DomainSeparator
// and the canonical declaration. Unlike the applied-tiers digest it also
// covers types, optionality, routes, allowlist names and descriptions.
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
