package policy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"
)

// AttributeError is the problem of a policy that names an attribute the
// schema does not declare: `context.amount`, `context has subject`, on a
// nested record (`context.payee.name`), on principal, action, resource or
// an entity literal (their types declare no attributes), or on a record
// literal. It is wrapped, with ErrSchema, by the *LoadError that names the
// attribute's file:line:column and the policy's id. It names no value.
type AttributeError struct {
	// Receiver is the attribute path of what the attribute is read on
	// ("context", "context.payee", "principal"), or "" when the policy
	// reads it on another expression (a record literal, an if).
	Receiver string
	// Attribute is the name the policy wrote, when it is an identifier
	// ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes); "" when the policy
	// wrote another string (context["…"], has "…"), which is not repeated
	// since it may be a value.
	Attribute string
	// Actions are the actions the policy applies to, sorted: an
	// attribute of context must be declared by at least one of them.
	Actions []string
	// Nearest is the declared attribute of the receiver the policy most
	// likely meant: one that begins with the name written or that it
	// begins with, else the nearest by edit distance (ties in byte
	// order), among those that are identifiers (a record literal's key
	// may be a value); "" when there is none.
	Nearest string
	// Payload is set when the receiver is context and the name is a
	// payload field of one of Actions: declared, but never sent to
	// ledgerd, so no policy can read it.
	Payload bool

	declaresNone bool // the receiver has no attribute at all
}

func (e *AttributeError) Error() string {
	var b strings.Builder
	switch {
	case e.Receiver != "":
		b.WriteString(e.Receiver)
	default:
		b.WriteString("the expression")
	}
	if e.Attribute != "" {
		fmt.Fprintf(&b, " has no attribute %q", e.Attribute)
	} else {
		b.WriteString(" has no such attribute (its name, written as a string, is not repeated)")
	}
	if strings.HasPrefix(e.Receiver, "context") {
		switch len(e.Actions) {
		case 1:
			fmt.Fprintf(&b, " in the declaration of %s", e.Actions[0])
		default:
			fmt.Fprintf(&b, " in any declaration of the policy's actions (%s)", strings.Join(e.Actions, ", "))
		}
	}
	switch {
	case e.Payload:
		b.WriteString(": it is a payload field, which never reaches ledgerd or a policy")
	case e.Nearest != "":
		fmt.Fprintf(&b, "; the nearest declared is %q", e.Nearest)
	case e.declaresNone:
		b.WriteString("; it declares none")
	}
	return b.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// A shape is one record type an expression may have: a record of the
// schema (context, an attribute's record, an entity's attributes) or a
// record literal of the policy.
type shape struct {
	schema resolved.RecordType
	lit    map[types.String]vtype // when isLit
	isLit  bool
}

func (s shape) names() []string {
	var out []string
	if s.isLit {
		for k := range s.lit {
			out = append(out, string(k))
		}
	} else {
		for k := range s.schema {
			out = append(out, string(k))
		}
	}
	return out
}

// vtype is what the attribute check knows of an expression's type: the
// record shapes it may have (one per action for context), or nothing
// (known false: not a record, or not worked out), in which case its
// attributes are left to the validator.
type vtype struct {
	known  bool
	shapes []shape
}

// attrRefusal is one attribute a policy names that no shape of its
// receiver declares.
type attrRefusal struct {
	receiver []string // the receiver's path, nil when it is not one
	name     string
	err      *AttributeError
}

// attrChecker walks a policy's conditions for every attribute access and
// has test (in every sub-expression, evaluated or not) and checks its
// name against the schema.
type attrChecker struct {
	schema   *resolved.Schema
	payload  map[string][]string // action → payload field names
	actions  []types.EntityUID   // the policy's actions, known to the schema
	refusals []attrRefusal
}

// checkAttributes returns every attribute p names that the schema does not
// declare, in the order of the walk. It checks nothing when the policy's
// action scope names no declared action: the validator refuses that.
func checkAttributes(sch *resolved.Schema, payload map[string][]string, p *xast.Policy) []attrRefusal {
	c := &attrChecker{schema: sch, payload: payload, actions: scopeActions(sch, p.Action)}
	if len(c.actions) == 0 {
		return nil
	}
	for _, cond := range p.Conditions {
		c.typeOf(cond.Body)
	}
	return c.refusals
}

// scopeActions returns the declared actions an action scope admits,
// sorted: all of them, the one named, or those named and the actions
// under them.
func scopeActions(sch *resolved.Schema, scope xast.IsActionScopeNode) []types.EntityUID {
	var roots []types.EntityUID
	switch sc := scope.(type) {
	case xast.ScopeTypeAll:
		return slices.SortedFunc(maps.Keys(sch.Actions), compareUID)
	case xast.ScopeTypeEq:
		if _, ok := sch.Actions[sc.Entity]; ok {
			return []types.EntityUID{sc.Entity}
		}
		return nil
	case xast.ScopeTypeIn:
		roots = []types.EntityUID{sc.Entity}
	case xast.ScopeTypeInSet:
		roots = sc.Entities
	}
	var out []types.EntityUID
	for uid := range sch.Actions {
		if slices.Contains(roots, uid) || slices.ContainsFunc(roots, func(r types.EntityUID) bool { return actionUnder(sch, uid, r) }) {
			out = append(out, uid)
		}
	}
	slices.SortFunc(out, compareUID)
	return out
}

func compareUID(a, b types.EntityUID) int {
	if c := strings.Compare(string(a.Type), string(b.Type)); c != 0 {
		return c
	}
	return strings.Compare(string(a.ID), string(b.ID))
}

// actionUnder reports whether action uid is a member, directly or not, of
// the action group root.
func actionUnder(sch *resolved.Schema, uid, root types.EntityUID) bool {
	seen := map[types.EntityUID]bool{uid: true}
	stack := []types.EntityUID{uid}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for parent := range sch.Actions[cur].Entity.Parents.All() {
			if parent == root {
				return true
			}
			if !seen[parent] {
				seen[parent] = true
				stack = append(stack, parent)
			}
		}
	}
	return false
}

// entityShape is the attributes of entity type et, or nothing when the
// schema does not know it (the validator refuses that). An enumerated
// entity type and the action type have no attributes.
func (c *attrChecker) entityShape(et types.EntityType) vtype {
	if e, ok := c.schema.Entities[et]; ok {
		return vtype{known: true, shapes: []shape{{schema: e.Shape}}}
	}
	if _, ok := c.schema.Enums[et]; ok {
		return vtype{known: true, shapes: []shape{{schema: resolved.RecordType{}}}}
	}
	for uid := range c.schema.Actions {
		if uid.Type == et {
			return vtype{known: true, shapes: []shape{{schema: resolved.RecordType{}}}}
		}
	}
	return vtype{}
}

// schemaType is what the check knows of a value of schema type t.
func (c *attrChecker) schemaType(t resolved.IsType) vtype {
	switch t := t.(type) {
	case resolved.RecordType:
		return vtype{known: true, shapes: []shape{{schema: t}}}
	case resolved.EntityType:
		return c.entityShape(types.EntityType(t))
	}
	return vtype{}
}

// valueType is what the check knows of a literal value.
func (c *attrChecker) valueType(v types.Value) vtype {
	switch v := v.(type) {
	case types.EntityUID:
		return c.entityShape(v.Type)
	case types.Record:
		lit := map[types.String]vtype{}
		for k, e := range v.All() {
			lit[k] = c.valueType(e)
		}
		return vtype{known: true, shapes: []shape{{lit: lit, isLit: true}}}
	}
	return vtype{}
}

func (c *attrChecker) variableType(name types.String) vtype {
	var out vtype
	seen := map[types.EntityType]bool{}
	for _, uid := range c.actions {
		a := c.schema.Actions[uid]
		if a.AppliesTo == nil {
			continue
		}
		var ets []types.EntityType
		switch name {
		case "context":
			out.shapes = append(out.shapes, shape{schema: a.AppliesTo.Context})
			continue
		case "principal":
			ets = a.AppliesTo.Principals
		case "resource":
			ets = a.AppliesTo.Resources
		case "action":
			ets = []types.EntityType{uid.Type}
		}
		for _, et := range ets {
			if seen[et] {
				continue
			}
			seen[et] = true
			t := c.entityShape(et)
			if !t.known {
				return vtype{}
			}
			out.shapes = append(out.shapes, t.shapes...)
		}
	}
	out.known = len(out.shapes) > 0
	return out
}

// typeOf walks n, checking every attribute it names, and returns what it
// knows of n's type.
func (c *attrChecker) typeOf(n xast.IsNode) vtype {
	switch n := n.(type) {
	case xast.NodeTypeVariable:
		return c.variableType(n.Name)
	case xast.NodeValue:
		return c.valueType(n.Value)
	case xast.NodeTypeAccess:
		return c.attribute(n.Arg, c.typeOf(n.Arg), n.Value)
	case xast.NodeTypeHas:
		c.attribute(n.Arg, c.typeOf(n.Arg), n.Value)
		return vtype{}
	case xast.NodeTypeIfThenElse:
		c.typeOf(n.If)
		t, e := c.typeOf(n.Then), c.typeOf(n.Else)
		if !t.known || !e.known {
			return vtype{}
		}
		return vtype{known: true, shapes: append(slices.Clip(t.shapes), e.shapes...)}
	case xast.NodeTypeRecord:
		lit := map[types.String]vtype{}
		for _, e := range n.Elements {
			lit[e.Key] = c.typeOf(e.Value)
		}
		return vtype{known: true, shapes: []shape{{lit: lit, isLit: true}}}
	}
	for _, child := range children(n) {
		c.typeOf(child)
	}
	return vtype{}
}

// attribute checks that some shape of recv (the type of expression arg)
// declares name and returns the attribute's type.
func (c *attrChecker) attribute(arg xast.IsNode, recv vtype, name types.String) vtype {
	if !recv.known || len(recv.shapes) == 0 {
		return vtype{}
	}
	var out vtype
	found, known := false, true
	var declared []string
	for _, s := range recv.shapes {
		var t vtype
		if s.isLit {
			lt, ok := s.lit[name]
			if !ok {
				declared = append(declared, s.names()...)
				continue
			}
			t = lt
		} else {
			a, ok := s.schema[name]
			if !ok {
				declared = append(declared, s.names()...)
				continue
			}
			t = c.schemaType(a.Type)
		}
		found = true
		known = known && t.known
		out.shapes = append(out.shapes, t.shapes...)
	}
	if found {
		out.known = known && len(out.shapes) > 0
		if !out.known {
			return vtype{}
		}
		return out
	}
	path := attrPath(arg)
	e := &AttributeError{Receiver: formatPath(path), Nearest: nearest(string(name), declared), declaresNone: len(declared) == 0}
	if identifier.MatchString(string(name)) {
		e.Attribute = string(name)
	}
	if len(path) > 0 && path[0] == "context" {
		for _, uid := range c.actions {
			e.Actions = append(e.Actions, string(uid.ID))
			e.Payload = e.Payload || len(path) == 1 && slices.Contains(c.payload[string(uid.ID)], string(name))
		}
	}
	c.refusals = append(c.refusals, attrRefusal{receiver: path, name: string(name), err: e})
	return vtype{}
}

// attrPath is the path of n when it is a variable followed by attribute
// accesses (context.payee: [context payee]), nil otherwise.
func attrPath(n xast.IsNode) []string {
	switch n := n.(type) {
	case xast.NodeTypeVariable:
		return []string{string(n.Name)}
	case xast.NodeTypeAccess:
		if p := attrPath(n.Arg); p != nil {
			return append(p, string(n.Value))
		}
	}
	return nil
}

// formatPath writes a path as the policy would, with an attribute that is
// not an identifier as […] (it may be a value).
func formatPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		switch {
		case i == 0:
			b.WriteString(p)
		case identifier.MatchString(p):
			b.WriteString("." + p)
		default:
			b.WriteString("[…]")
		}
	}
	return b.String()
}

// nearest returns the identifier in names that the one written most likely
// meant: one that begins with it or that it begins with (amount for
// amount_minor), the shortest first, else the one at the least edit
// distance; the first in byte order among equals, "" if there is none.
func nearest(name string, names []string) string {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !identifier.MatchString(n) })
	slices.Sort(names)
	names = slices.Compact(names)
	best, bestPrefix, bestD := "", false, 0
	for _, n := range names {
		prefix := name != "" && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n))
		d := editDistance(name, n)
		if prefix {
			d = len(n)
		}
		if best == "" || prefix && !bestPrefix || prefix == bestPrefix && d < bestD {
			best, bestPrefix, bestD = n, prefix, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (declared names are ASCII); a is cut at 256 bytes to bound the work.
func editDistance(a, b string) int {
	if len(a) > 256 {
		a = a[:256]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// children returns n's direct sub-expressions, in source order.
func children(n xast.IsNode) []xast.IsNode {
	switch n := n.(type) {
	case xast.NodeTypeIfThenElse:
		return []xast.IsNode{n.If, n.Then, n.Else}
	case xast.NodeTypeOr:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeAnd:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeLessThan:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeLessThanOrEqual:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeGreaterThan:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeGreaterThanOrEqual:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeNotEquals:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeEquals:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeIn:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeHasTag:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeGetTag:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeSub:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeAdd:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeMult:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeContains:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeContainsAll:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeContainsAny:
		return []xast.IsNode{n.Left, n.Right}
	case xast.NodeTypeHas:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeAccess:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeLike:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeIs:
		return []xast.IsNode{n.Left}
	case xast.NodeTypeIsIn:
		return []xast.IsNode{n.Left, n.Entity}
	case xast.NodeTypeNegate:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeNot:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeIsEmpty:
		return []xast.IsNode{n.Arg}
	case xast.NodeTypeExtensionCall:
		return slices.Clone(n.Args)
	case xast.NodeTypeRecord:
		out := make([]xast.IsNode, len(n.Elements))
		for i, e := range n.Elements {
			out[i] = e.Value
		}
		return out
	case xast.NodeTypeSet:
		return slices.Clone(n.Elements)
	}
	return nil // NodeValue, NodeTypeVariable
}

// withChildren returns a copy of n with its direct sub-expressions, in the
// order children returns them, replaced by cs.
func withChildren(n xast.IsNode, cs []xast.IsNode) xast.IsNode {
	bin := func() xast.BinaryNode { return xast.BinaryNode{Left: cs[0], Right: cs[1]} }
	switch n := n.(type) {
	case xast.NodeTypeIfThenElse:
		return xast.NodeTypeIfThenElse{If: cs[0], Then: cs[1], Else: cs[2]}
	case xast.NodeTypeOr:
		return xast.NodeTypeOr{BinaryNode: bin()}
	case xast.NodeTypeAnd:
		return xast.NodeTypeAnd{BinaryNode: bin()}
	case xast.NodeTypeLessThan:
		return xast.NodeTypeLessThan{BinaryNode: bin()}
	case xast.NodeTypeLessThanOrEqual:
		return xast.NodeTypeLessThanOrEqual{BinaryNode: bin()}
	case xast.NodeTypeGreaterThan:
		return xast.NodeTypeGreaterThan{BinaryNode: bin()}
	case xast.NodeTypeGreaterThanOrEqual:
		return xast.NodeTypeGreaterThanOrEqual{BinaryNode: bin()}
	case xast.NodeTypeNotEquals:
		return xast.NodeTypeNotEquals{BinaryNode: bin()}
	case xast.NodeTypeEquals:
		return xast.NodeTypeEquals{BinaryNode: bin()}
	case xast.NodeTypeIn:
		return xast.NodeTypeIn{BinaryNode: bin()}
	case xast.NodeTypeHasTag:
		return xast.NodeTypeHasTag{BinaryNode: bin()}
	case xast.NodeTypeGetTag:
		return xast.NodeTypeGetTag{BinaryNode: bin()}
	case xast.NodeTypeSub:
		return xast.NodeTypeSub{BinaryNode: bin()}
	case xast.NodeTypeAdd:
		return xast.NodeTypeAdd{BinaryNode: bin()}
	case xast.NodeTypeMult:
		return xast.NodeTypeMult{BinaryNode: bin()}
	case xast.NodeTypeContains:
		return xast.NodeTypeContains{BinaryNode: bin()}
	case xast.NodeTypeContainsAll:
		return xast.NodeTypeContainsAll{BinaryNode: bin()}
	case xast.NodeTypeContainsAny:
		return xast.NodeTypeContainsAny{BinaryNode: bin()}
	case xast.NodeTypeHas:
		n.Arg = cs[0]
		return n
	case xast.NodeTypeAccess:
		n.Arg = cs[0]
		return n
	case xast.NodeTypeLike:
		n.Arg = cs[0]
		return n
	case xast.NodeTypeIs:
		n.Left = cs[0]
		return n
	case xast.NodeTypeIsIn:
		n.Left, n.Entity = cs[0], cs[1]
		return n
	case xast.NodeTypeNegate:
		return xast.NodeTypeNegate{UnaryNode: xast.UnaryNode{Arg: cs[0]}}
	case xast.NodeTypeNot:
		return xast.NodeTypeNot{UnaryNode: xast.UnaryNode{Arg: cs[0]}}
	case xast.NodeTypeIsEmpty:
		return xast.NodeTypeIsEmpty{UnaryNode: xast.UnaryNode{Arg: cs[0]}}
	case xast.NodeTypeExtensionCall:
		n.Args = slices.Clone(cs)
		return n
	case xast.NodeTypeRecord:
		els := slices.Clone(n.Elements)
		for i := range els {
			els[i].Value = cs[i]
		}
		n.Elements = els
		return n
	case xast.NodeTypeSet:
		n.Elements = slices.Clone(cs)
		return n
	}
	return n
}
