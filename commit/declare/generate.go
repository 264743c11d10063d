package declare

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/project"
	"github.com/decisionledger/ledger/commit/tier"
)

// The generated artifacts. Each is a pure function of the declarations, so
// the tier table, the Cedar schema a policy is validated against and the
// JSON Schema ledgerd checks attributes with cannot drift apart.

// Cedar entity types of a decision: the agent acting is the principal, the
// tool it calls is the resource. Policies name them; the context is what
// the declaration lets cross.
const (
	CedarPrincipal = "Agent"
	CedarResource  = "Tool"
)

// CedarSchema returns a Cedar schema (human-readable format) declaring the
// principal and resource entity types and, for each declaration, its
// action with the minimized attributes as context: a policy field as its
// Cedar type, a derived field as a record of its projections. Optional
// fields are optional attributes; payload fields (json ones among them)
// are not attributes. Actions are in name order.
func CedarSchema(decls ...*Declaration) []byte {
	var b strings.Builder
	b.WriteString("// Generated from action declarations (docs/declarations.md); do not edit.\n")
	fmt.Fprintf(&b, "entity %s;\n\nentity %s;\n", CedarPrincipal, CedarResource)
	sorted := slices.Clone(decls)
	slices.SortFunc(sorted, func(a, b *Declaration) int { return strings.Compare(a.Action, b.Action) })
	for _, d := range sorted {
		fmt.Fprintf(&b, "\naction %q appliesTo {\n\tprincipal: %s,\n\tresource: %s,\n\tcontext: {", d.Action, CedarPrincipal, CedarResource)
		first := true
		for _, f := range d.Fields {
			if f.Tier == tier.Payload {
				continue
			}
			if !first {
				b.WriteString(",")
			}
			first = false
			opt := ""
			if f.Optional {
				opt = "?"
			}
			fmt.Fprintf(&b, "\n\t\t%s%s: ", cedarName(f.Name), opt)
			if f.Tier == tier.Policy {
				b.WriteString(cedarType(f.Type))
				continue
			}
			b.WriteString("{")
			for i, p := range f.Projections {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "\n\t\t\t%s: %s", p, cedarType(projections[p].output))
			}
			b.WriteString("\n\t\t}")
		}
		if !first {
			b.WriteString("\n\t")
		}
		b.WriteString("}\n};\n")
	}
	return []byte(b.String())
}

// cedarReserved are Cedar's reserved words: a field of one of these names
// is written as a string in the schema ("in": Long), since the schema
// grammar takes no reserved word as an attribute name. A policy reads such
// an attribute as context["in"].
var cedarReserved = []string{"true", "false", "if", "then", "else", "in", "like", "has", "is"}

// cedarName writes a field name as a Cedar schema attribute name.
func cedarName(name string) string {
	if slices.Contains(cedarReserved, name) {
		return `"` + name + `"`
	}
	return name
}

func cedarType(t Type) string {
	switch t {
	case Integer:
		return "Long"
	case Boolean:
		return "Bool"
	case StringList:
		return "Set<String>"
	}
	return "String"
}

// JSONSchema returns the JSON Schema (draft 2020-12) of the action's
// minimized attributes as they travel to ledgerd: an object with exactly
// the policy and derived fields (required unless optional), a derived
// field an object with exactly its projections, route_shape one of the
// declared templates or "unmatched". It admits nothing a client could use
// to widen disclosure.
func (d *Declaration) JSONSchema() []byte {
	props := map[string]any{}
	required := []string{}
	for _, f := range d.Fields {
		if f.Tier == tier.Payload {
			continue
		}
		if !f.Optional {
			required = append(required, f.Name)
		}
		if f.Tier == tier.Policy {
			props[f.Name] = jsonType(f.Type)
			continue
		}
		inner := map[string]any{}
		for _, p := range f.Projections {
			s := jsonType(projections[p].output)
			switch p {
			case "route_shape":
				s = map[string]any{"enum": append(slices.Clone(f.Routes), project.Unmatched)}
			case "byte_size", "count":
				s["minimum"] = 0
			}
			inner[p] = s
		}
		props[f.Name] = map[string]any{
			"type": "object", "additionalProperties": false,
			"required": slices.Clone(f.Projections), "properties": inner,
		}
	}
	schema := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "urn:decision-ledger:attributes:" + d.Action,
		"title":                "Minimized attributes of " + d.Action,
		"type":                 "object",
		"additionalProperties": false,
		"required":             required,
		"properties":           props,
	}
	out, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		panic(err) // maps of strings, numbers and slices always marshal
	}
	return append(out, '\n')
}

func jsonType(t Type) map[string]any {
	switch t {
	case Integer:
		return map[string]any{"type": "integer", "minimum": -commit.MaxSafeInteger, "maximum": commit.MaxSafeInteger}
	case Boolean:
		return map[string]any{"type": "boolean"}
	case StringList:
		return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	}
	return map[string]any{"type": "string"}
}
