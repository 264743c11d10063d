package declare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/project"
	"github.com/decisionledger/ledger/commit/tier"
)

// Options configure Minimize. The zero value is the default.
type Options struct {
	// Domain is the strict domain of the raw parameters, for their
	// digest. Optional; default commit.Domain{}.
	Domain commit.Domain
	// Allowlists are payee_known's lists, by the name a declaration gives
	// them; a list that is missing makes every payee unknown (false).
	Allowlists map[string]map[string]bool
	// Floor, if set, caps the tiers a declaration may give; Minimize
	// refuses a declaration that goes past it. Optional; default none.
	Floor Floor
	// Openings, if set, make the commitment the hiding one (version 2,
	// docs/commitment.md §7) under openings from this source, usually
	// commit.RandomOpenings(); Result.Disclosure then opens it. Optional;
	// default version 1.
	Openings commit.OpeningSource
}

// Result is what a workload sends for one call: the commitment to its full
// raw parameters, the minimized attributes (canonical JSON) and the
// applied-tiers digest.
type Result struct {
	Params     commit.Commitment
	Attributes []byte
	Tiers      commit.Digest
	// Disclosure opens a hiding commitment (Options.Openings): every
	// field's value and opening, for the workload's disclosure store and
	// never for the ledger. Nil for version 1.
	Disclosure *commit.Disclosure
}

// Minimize computes, from a call's raw parameters (a JSON object), the
// parameter commitment over all of them, the minimized attributes the
// declaration lets cross, and the applied-tiers digest. The commitment and
// the minimization share the raw bytes and nothing else: the digest is
// computed from raw before anything is decoded for minimization.
//
// It refuses, with an *Error naming the parameter's JSON pointer and never
// its value, parameters outside the strict domain, a declared field that
// is absent (unless optional) or of the wrong type, and a value a
// projection refuses (a malformed address or URL, say). A payee_known
// projection never refuses: anything but a listed string gives false.
func (d *Declaration) Minimize(raw []byte, opts Options) (Result, error) {
	if err := opts.Floor.Check(d); err != nil {
		return Result{}, err
	}
	var params commit.Commitment
	var disclosure *commit.Disclosure
	var err error
	if opts.Openings != nil {
		params, disclosure, err = opts.Domain.Hide(raw, opts.Openings)
	} else {
		params, err = opts.Domain.Params(raw)
	}
	if err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return Result{}, &Error{Action: d.Action, Pointer: d.safePointer(de.Pointer), Code: CodeDomainPrefix + string(de.Kind), Problem: "parameters outside the strict domain: " + string(de.Kind)}
		}
		var oe *commit.DisclosureError
		if errors.As(err, &oe) { // a disclosure as the source lacks a field the call has
			return Result{}, &Error{Action: d.Action, Pointer: d.safePointer("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(oe.Field)), Code: CodeOpeningMissing, Problem: "no opening for a field of the parameters", Err: err}
		}
		return Result{}, &Error{Action: d.Action, Code: CodeInternal, Problem: "parameters outside the strict domain"}
	}
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil {
		// Params accepted raw, so this is not a JSON object of parameters.
		return Result{}, &Error{Action: d.Action, Code: CodeInternal, Problem: "parameters are not a JSON object"}
	}
	attrs := make(map[string]any, len(d.Fields))
	for _, f := range d.Fields {
		v, present := values[f.Name]
		pointer := "/" + escapePointer(f.Name)
		if !present {
			if f.Optional {
				continue
			}
			return Result{}, &Error{Action: d.Action, Pointer: pointer, Code: CodeFieldAbsent, Problem: "declared field is absent"}
		}
		attr, crosses, err := d.fieldAttribute(f, v, opts)
		if err != nil {
			return Result{}, err
		}
		if crosses {
			attrs[f.Name] = attr
		}
	}
	attributes, err := commit.CanonicalizeValue(attrs)
	if err != nil {
		return Result{}, &Error{Action: d.Action, Code: CodeInternal, Problem: "minimized attributes outside the strict domain", Err: err}
	}
	tiers, err := d.TiersDigest()
	if err != nil {
		return Result{}, &Error{Action: d.Action, Code: CodeInternal, Problem: "tier table", Err: err}
	}
	return Result{Params: params, Attributes: attributes, Tiers: tiers, Disclosure: disclosure}, nil
}

// fieldAttribute is what field f with value v (decoded with UseNumber)
// puts into the attributes: the value itself (policy), its projections
// (derived), or nothing (payload; crosses is false).
func (d *Declaration) fieldAttribute(f Field, v any, opts Options) (attr any, crosses bool, err error) {
	pointer := "/" + escapePointer(f.Name)
	if problem := checkType(f.Type, v); problem != "" {
		return nil, false, &Error{Action: d.Action, Pointer: pointer, Code: CodeFieldType, Problem: problem}
	}
	switch f.Tier {
	case tier.Policy:
		return v, true, nil
	case tier.Derived:
		out := make(map[string]any, len(f.Projections))
		for _, p := range f.Projections {
			pv, err := f.project(p, v, opts.Allowlists)
			if err != nil {
				return nil, false, &Error{Action: d.Action, Pointer: pointer, Code: CodeProjectionRefused, Problem: err.Error(), Err: err}
			}
			out[p] = pv
		}
		return out, true, nil
	}
	return nil, false, nil
}

// FieldAttribute recomputes, from one field's value (JSON text, as a
// disclosure gives it), the attribute Minimize records for the field: its
// canonical JSON, or crosses false for a payload field, which records
// nothing. An auditor compares it with the entry's attribute to check that
// a derived attribute was computed honestly (ledger-verify disclose). A
// field the declaration does not name is an *Error with CodeUndeclared.
func (d *Declaration) FieldAttribute(name string, value []byte, opts Options) (attr []byte, crosses bool, err error) {
	f, ok := d.Field(name)
	if !ok {
		return nil, false, &Error{Action: d.Action, Pointer: "(an undeclared field)", Code: CodeUndeclared, Problem: "the declaration does not name this field"}
	}
	if _, err := opts.Domain.Canonicalize(value); err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return nil, false, &Error{Action: d.Action, Pointer: "/" + escapePointer(name), Code: CodeDomainPrefix + string(de.Kind), Problem: "value outside the strict domain: " + string(de.Kind)}
		}
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, &Error{Action: d.Action, Pointer: "/" + escapePointer(name), Code: CodeInternal, Problem: "value is not JSON"}
	}
	a, crosses, err := d.fieldAttribute(f, v, opts)
	if err != nil || !crosses {
		return nil, crosses, err
	}
	attr, err = commit.CanonicalizeValue(a)
	if err != nil {
		return nil, false, &Error{Action: d.Action, Code: CodeInternal, Problem: "attribute outside the strict domain", Err: err}
	}
	return attr, true, nil
}

// safePointer shortens a pointer into the parameters to what the
// declaration names: a member name below a declared field, or any name of
// an undeclared one, is parameter content and may be secret. The
// commit.DomainError is not kept, since its Pointer is the whole path.
func (d *Declaration) safePointer(p string) string {
	if p == "" {
		return ""
	}
	first, _, _ := strings.Cut(p[1:], "/")
	name := strings.NewReplacer("~1", "/", "~0", "~").Replace(first)
	if _, ok := d.Field(name); ok {
		return "/" + first
	}
	return "(an undeclared field)"
}

// checkType says what is wrong with v as a value of type t, or "".
func checkType(t Type, v any) string {
	switch t {
	case JSON:
		return "" // any value, null included: the call is in the strict domain
	case String:
		if _, ok := v.(string); ok {
			return ""
		}
	case Boolean:
		if _, ok := v.(bool); ok {
			return ""
		}
	case Integer:
		if n, ok := v.(json.Number); ok {
			if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return ""
			}
			return "not an integer written without fraction or exponent"
		}
	case StringList:
		if a, ok := v.([]any); ok {
			for _, e := range a {
				if _, ok := e.(string); !ok {
					return "not an array of strings"
				}
			}
			return ""
		}
	}
	return fmt.Sprintf("not a %s", t)
}

// project applies the projection named p to v.
func (f Field) project(p string, v any, allowlists map[string]map[string]bool) (any, error) {
	switch p {
	case "recipient_domain":
		return project.RecipientDomain(v)
	case "payee_known":
		return project.PayeeKnown(v, allowlists[f.Allowlist]), nil
	case "endpoint_host":
		return project.EndpointHost(v)
	case "route_shape":
		return project.RouteShape(v, f.Routes)
	case "resource_dir":
		return project.ResourceDir(v)
	case "byte_size":
		return project.ByteSize(v)
	case "count":
		return project.Count(v)
	}
	// Parse admits only the projections above.
	return nil, fmt.Errorf("projection %s is not implemented", p)
}

// Floor caps how far a workload lets each field cross, whatever a
// declaration says: for each action, the highest tier of each field, with
// "*" for the fields the action's map does not name. A declaration may
// narrow disclosure below the floor but never widen it past: Check refuses
// a field declared policy where the floor says derived, or derived (or
// policy) where it says payload. An action the floor does not name is not
// capped. The order is payload < derived < policy.
//
// A floor is off by default (nil). It caps the declaration, not the call:
// a refused declaration minimizes nothing.
type Floor map[string]map[string]tier.Tier

// Check returns an *Error for the first field of d that the floor caps
// below its declared tier.
func (fl Floor) Check(d *Declaration) error {
	caps, ok := fl[d.Action]
	if !ok {
		return nil
	}
	for _, f := range d.Fields {
		limit, ok := caps[f.Name]
		if !ok {
			if limit, ok = caps["*"]; !ok {
				continue
			}
		}
		rank, known := tierRank[limit]
		if !known {
			return &Error{Action: d.Action, Pointer: "/fields/" + escapePointer(f.Name), Code: CodeFloorExceeded,
				Problem: fmt.Sprintf("the floor names an unknown tier %q", limit)}
		}
		if tierRank[f.Tier] > rank {
			return &Error{Action: d.Action, Pointer: "/fields/" + escapePointer(f.Name) + "/tier", Code: CodeFloorExceeded,
				Problem: fmt.Sprintf("declared %s, past the workload's floor of %s", f.Tier, limit)}
		}
	}
	return nil
}

var tierRank = map[tier.Tier]int{tier.Payload: 0, tier.Derived: 1, tier.Policy: 2}
