package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/termtext"
)

// fill are the members of a body given by flags instead (--principal;
// for append, --decision and --policy): what minimize leaves out.
type fill struct {
	principal, decision *string
	policies            *policyFlag
}

func registerFill(fs *flag.FlagSet, decide bool) fill {
	f := fill{principal: fs.String("principal", "", "")}
	if !decide {
		f.decision = fs.String("decision", "", "")
		f.policies = new(policyFlag)
		fs.Var(f.policies, "policy", "")
	}
	return f
}

// The members of a body: an append's (POST /v1/entries), a decide's
// (POST /v1/decide), docs/api.md.
var (
	appendMembers = []string{"action", "attributes", "decision", "params_digest", "params_size", "policies", "preview", "principal", "tiers_digest"}
	decideMembers = []string{"action", "attributes", "params_digest", "params_size", "preview", "principal", "tiers_digest"}
)

// parseBody reads an append body (decide false) or a decide body strictly:
// one JSON object in the strict domain (docs/commitment.md) with exactly
// the members of the request, "policies" and "preview" optional, and
// "principal" (and an append's "decision" and "policies") either in the
// body or given by the flags of f, not both. The server checks the rest
// (a decision's value, identifier characters, sizes).
func parseBody(raw []byte, decide bool, f fill) (client.Decision, error) {
	var d client.Decision
	obj, err := commit.Domain{}.Object(raw)
	if err != nil {
		return d, err
	}
	members := appendMembers
	if decide {
		members = decideMembers
	}
	for i := range obj.Len() {
		if name := obj.Name(i); !contains(members, name) {
			return d, fmt.Errorf("unknown member %s", termtext.Quote(name))
		}
	}
	text := func(name string) (string, error) {
		v, ok := obj.Get(name)
		if !ok {
			return "", fmt.Errorf("no %q member", name)
		}
		s, ok := v.Text()
		if !ok {
			return "", fmt.Errorf("%q is not a string", name)
		}
		return s, nil
	}
	// filled reads a member the body may leave to a flag.
	filled := func(name, flagValue string) (string, bool, error) {
		_, inBody := obj.Get(name)
		switch {
		case inBody && flagValue != "":
			return "", false, fmt.Errorf("%q is in the body and given by --%s: give it once", name, name)
		case !inBody && flagValue != "":
			return flagValue, true, nil
		}
		s, err := text(name)
		if err != nil && !inBody {
			err = fmt.Errorf("no %q member (or --%s)", name, name)
		}
		return s, false, err
	}
	if d.Principal, _, err = filled("principal", *f.principal); err != nil {
		return d, err
	}
	var params, tiers string
	for _, m := range []struct {
		name string
		to   *string
	}{{"action", &d.Action}, {"params_digest", &params}, {"tiers_digest", &tiers}} {
		if *m.to, err = text(m.name); err != nil {
			return d, err
		}
	}
	if !decide {
		decision, _, err := filled("decision", *f.decision)
		if err != nil {
			return d, err
		}
		d.Decision = entry.Decision(decision)
		_, inBody := obj.Get("policies")
		switch {
		case inBody && len(*f.policies) > 0:
			return d, errors.New(`"policies" is in the body and given by --policy: give it once`)
		case len(*f.policies) > 0:
			d.Policies = *f.policies
		case inBody:
			v, _ := obj.Get("policies")
			var ok bool
			if d.Policies, ok = v.TextList(); !ok {
				return d, errors.New(`"policies" is not an array of strings`)
			}
		}
	}
	if d.Params.Digest, d.Params.Hiding, err = commit.ParseParamsDigest(params); err != nil {
		return d, fmt.Errorf("params_digest: %w", err)
	}
	if d.Tiers, err = commit.ParseDigest(tiers); err != nil {
		return d, fmt.Errorf("tiers_digest: %w", err)
	}
	v, ok := obj.Get("params_size")
	if !ok {
		return d, errors.New(`no "params_size" member`)
	}
	n, ok := v.Integer()
	if !ok || n < 0 {
		return d, errors.New(`"params_size" is not a non-negative integer`)
	}
	d.Params.Size = int(n)
	v, ok = obj.Get("attributes")
	if !ok {
		return d, errors.New(`no "attributes" member`)
	}
	if !v.IsObject() {
		return d, errors.New(`"attributes" is not an object`)
	}
	d.Attributes = v.Canonical()
	if v, ok := obj.Get("preview"); ok {
		d.Preview = v.Canonical()
	}
	return d, nil
}
