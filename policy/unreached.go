package policy

import (
	"errors"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// cedar-go's validator, like Cedar's, does not typecheck a branch that a
// condition typed as a constant cuts off for every request the policy
// applies to: the right of `false && …` (of any left side typed False:
// `1 == 2`, `principal is Tool`) or of `true || …`, the then branch of an
// if whose condition is typed False, the else branch of one typed True.
// Such a branch is never evaluated, but its text is part of the set a
// reader audits, so it is typechecked here: each such branch is found
// with a probe, the condition made opaque (C becomes C || O, or C && O,
// where O is a Bool the validator cannot fold), and the rewritten policy
// must validate for at least one of the policy's actions (a branch may
// be written for one action of several).

// probeName is an attribute no declaration can declare (field names are
// [A-Za-z][A-Za-z0-9_]*, without spaces): reading it on context is an error that names it, and
// that error appears exactly when the validator typechecks the probe.
const probeName = "ledger unreached probe"

var (
	probe = xast.NodeTypeAccess{StrOpNode: xast.StrOpNode{Arg: xast.NodeTypeVariable{Name: "context"}, Value: probeName}}
	// opaque is ip("127.0.0.1").isLoopback(): Bool, valid everywhere,
	// needs no capability, and not folded to True or False.
	opaque = xast.NodeTypeExtensionCall{Name: "isLoopback", Args: []xast.IsNode{
		xast.NodeTypeExtensionCall{Name: "ip", Args: []xast.IsNode{xast.NodeValue{Value: types.String("127.0.0.1")}}},
	}}
)

type unreached struct {
	v      *validate.Validator
	p      *xast.Policy
	cond   xast.ConditionType // the condition being walked
	opened int                // branches made reachable
}

// checkUnreached returns nil when the validator typechecks every branch of
// p's conditions for some request, or when p, with those it does not
// made reachable, validates for at least one of p's actions; otherwise
// the validator's complaints, for each action when there are several.
// p has validated as it is.
func checkUnreached(v *validate.Validator, sch *resolved.Schema, id string, p *xast.Policy) error {
	u := &unreached{v: v, p: p}
	conds := slices.Clone(p.Conditions)
	for i, c := range conds {
		u.cond = c
		conds[i].Body = u.open(c.Body, func(n xast.IsNode) xast.IsNode { return n })
	}
	if u.opened == 0 {
		return nil
	}
	actions := scopeActions(sch, p.Action)
	errs := make([]string, 0, len(actions))
	for _, uid := range actions {
		q := *p
		q.Action = xast.ScopeTypeEq{Entity: uid}
		q.Conditions = conds
		err := v.Policy(id, &q)
		if err == nil {
			return nil
		}
		msg := validatorMessage(id, err)
		if len(actions) > 1 {
			msg = "for " + string(uid.ID) + ": " + msg
		}
		errs = append(errs, msg)
	}
	return errors.New(strings.Join(errs, "; "))
}

// reached reports whether the validator typechecks the probe placed in
// the current condition by whole (which builds the condition around it).
func (u *unreached) reached(whole xast.IsNode) bool {
	q := *u.p
	q.Conditions = []xast.ConditionType{{Condition: u.cond.Condition, Body: whole}}
	err := u.v.Policy("", &q)
	return err != nil && strings.Contains(err.Error(), "`"+probeName+"`")
}

// open returns n with every branch the validator does not reach made
// reachable; wrap builds the current condition around a replacement of n.
func (u *unreached) open(n xast.IsNode, wrap func(xast.IsNode) xast.IsNode) xast.IsNode {
	switch m := n.(type) {
	case xast.NodeTypeAnd:
		if !u.reached(wrap(xast.NodeTypeAnd{BinaryNode: xast.BinaryNode{Left: m.Left, Right: probe}})) {
			m.Left = xast.NodeTypeOr{BinaryNode: xast.BinaryNode{Left: m.Left, Right: opaque}}
			n, u.opened = m, u.opened+1
		}
	case xast.NodeTypeOr:
		if !u.reached(wrap(xast.NodeTypeOr{BinaryNode: xast.BinaryNode{Left: m.Left, Right: probe}})) {
			m.Left = xast.NodeTypeAnd{BinaryNode: xast.BinaryNode{Left: m.Left, Right: opaque}}
			n, u.opened = m, u.opened+1
		}
	case xast.NodeTypeIfThenElse:
		switch {
		case !u.reached(wrap(xast.NodeTypeIfThenElse{If: m.If, Then: probe, Else: m.Else})):
			m.If = xast.NodeTypeOr{BinaryNode: xast.BinaryNode{Left: m.If, Right: opaque}}
			n, u.opened = m, u.opened+1
		case !u.reached(wrap(xast.NodeTypeIfThenElse{If: m.If, Then: m.Then, Else: probe})):
			m.If = xast.NodeTypeAnd{BinaryNode: xast.BinaryNode{Left: m.If, Right: opaque}}
			n, u.opened = m, u.opened+1
		}
	}
	cs := children(n)
	for i := range cs {
		cs[i] = u.open(cs[i], func(x xast.IsNode) xast.IsNode {
			with := slices.Clone(cs)
			with[i] = x
			return wrap(withChildren(n, with))
		})
	}
	return withChildren(n, cs)
}
