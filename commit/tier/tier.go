// Package tier defines the tier table of an action — which of its
// parameter fields cross to the mediator raw (policy), only as projections
// (derived), or never (payload) — and the applied-tiers digest that an
// entry records, so that an auditor can tell which disclosure rules were
// applied to a decision.
//
// The digest is
//
//	SHA-256("ledger/v1/tiers\n" || JCS(table))
//
// over the normalized table, a JSON object:
//
//	{"action":"send_email","fields":[
//	  {"name":"body","projections":["byte_size"],"tier":"derived"},
//	  {"name":"recipient","projections":["recipient_domain"],"tier":"derived"},
//	  {"name":"subject","projections":[],"tier":"payload"}]}
//
// with fields sorted by name (byte order), each field's projections sorted
// and without repeats, and projections only on derived fields (which need
// at least one). Fields the table does not name are unclassified: they
// reach only the parameter digest. The digest is written like a parameter
// digest ("sha256:<hex>"). A change to this form takes a new domain
// string.
package tier

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/decisionledger/ledger/commit"
)

// DomainSeparator prefixes the canonical table in the applied-tiers digest.
const DomainSeparator = "ledger/v1/tiers\n"

// Tier says how far a field's value crosses.
type Tier string

const (
	Policy  Tier = "policy"  // the raw value crosses
	Derived Tier = "derived" // only its projections cross
	Payload Tier = "payload" // nothing crosses
)

// Field is one classified parameter field.
type Field struct {
	Name        string
	Tier        Tier
	Projections []string // derived fields only
}

// Table is an action's tier table.
type Table struct {
	Action string
	Fields []Field
}

// Normalize checks t and returns it in normal form: fields sorted by name,
// projections sorted. It refuses an empty action, an empty or repeated
// field name, an unknown tier, projections on a policy or payload field,
// a derived field without projections, and a repeated projection.
func (t Table) Normalize() (Table, error) {
	if t.Action == "" {
		return Table{}, fmt.Errorf("tier: empty action name")
	}
	fields := slices.Clone(t.Fields)
	slices.SortFunc(fields, func(a, b Field) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i, f := range fields {
		if f.Name == "" {
			return Table{}, fmt.Errorf("tier: action %s: a field has no name", t.Action)
		}
		if i > 0 && fields[i-1].Name == f.Name {
			return Table{}, fmt.Errorf("tier: action %s: field %q classified twice", t.Action, f.Name)
		}
		p := slices.Clone(f.Projections)
		slices.Sort(p)
		if len(slices.Compact(slices.Clone(p))) != len(p) {
			return Table{}, fmt.Errorf("tier: action %s: field %q repeats a projection", t.Action, f.Name)
		}
		switch f.Tier {
		case Derived:
			if len(p) == 0 {
				return Table{}, fmt.Errorf("tier: action %s: derived field %q has no projection", t.Action, f.Name)
			}
		case Policy, Payload:
			if len(p) != 0 {
				return Table{}, fmt.Errorf("tier: action %s: %s field %q cannot have projections", t.Action, f.Tier, f.Name)
			}
		default:
			return Table{}, fmt.Errorf("tier: action %s: field %q has unknown tier %q", t.Action, f.Name, f.Tier)
		}
		fields[i].Projections = p
	}
	return Table{Action: t.Action, Fields: fields}, nil
}

// Canonical returns the JCS form of the normalized table.
func (t Table) Canonical() ([]byte, error) {
	n, err := t.Normalize()
	if err != nil {
		return nil, err
	}
	fields := make([]any, len(n.Fields))
	for i, f := range n.Fields {
		projections := make([]any, len(f.Projections))
		for j, p := range f.Projections {
			projections[j] = p
		}
		fields[i] = map[string]any{"name": f.Name, "tier": string(f.Tier), "projections": projections}
	}
	return commit.CanonicalizeValue(map[string]any{"action": n.Action, "fields": fields})
}

// Digest returns the applied-tiers digest of t.
func (t Table) Digest() (commit.Digest, error) {
	c, err := t.Canonical()
	if err != nil {
		return commit.Digest{}, err
	}
	return sha256.Sum256(append([]byte(DomainSeparator), c...)), nil
}
