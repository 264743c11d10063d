package commit

import (
	"encoding/json"
	"strconv"
)

// Object is a JSON object checked against the strict domain, for reading
// its members: a request body, say, decoded under the same rules as the
// parameters it describes.
type Object struct {
	members []member // in canonical order
}

// Object checks that data is one JSON object inside the domain and returns
// it. Refusals are *DomainError, as Canonicalize's are.
func (d Domain) Object(data []byte) (Object, error) {
	n, err := d.parseObject(data)
	if err != nil {
		return Object{}, err
	}
	return Object{members: n.members}, nil
}

// Len returns the number of members.
func (o Object) Len() int { return len(o.members) }

// Name returns the i-th member name in canonical order.
func (o Object) Name(i int) string { return string(o.members[i].name) }

// Get returns the named member's value, if the object has the member.
func (o Object) Get(name string) (Value, bool) {
	for i := range o.members {
		if string(o.members[i].name) == name {
			return Value{&o.members[i].value}, true
		}
	}
	return Value{}, false
}

// Value is one checked JSON value of an Object.
type Value struct{ n *node }

// Text returns a string value.
func (v Value) Text() (string, bool) {
	if v.n.kind != kindString {
		return "", false
	}
	return string(v.n.text), true
}

// Integer returns an integer value (its exact decimal value is an integer,
// however it was written).
func (v Value) Integer() (int64, bool) {
	if v.n.kind != kindInteger {
		return 0, false
	}
	return v.n.num, true
}

// TextList returns an array of strings.
func (v Value) TextList() ([]string, bool) {
	if v.n.kind != kindArray {
		return nil, false
	}
	list := make([]string, len(v.n.elems))
	for i := range v.n.elems {
		if v.n.elems[i].kind != kindString {
			return nil, false
		}
		list[i] = string(v.n.elems[i].text)
	}
	return list, true
}

// IsObject reports whether the value is an object.
func (v Value) IsObject() bool { return v.n.kind == kindObject }

// Canonical returns the value's RFC 8785 form.
func (v Value) Canonical() []byte {
	return appendCanonical(make([]byte, 0, canonicalLen(v.n)), v.n)
}

// Any returns the value as encoding/json decodes its text with UseNumber:
// map[string]any for an object, []any, string, json.Number (the
// canonical spelling), bool or nil. It is the form JSON Schema validators
// and the policy package read, built from the checked tree so that a
// request's attributes are parsed once.
func (v Value) Any() any { return nodeAny(v.n) }

// Any returns the object as Value.Any does.
func (o Object) Any() map[string]any { return membersAny(o.members) }

func nodeAny(n *node) any {
	switch n.kind {
	case kindFalse:
		return false
	case kindTrue:
		return true
	case kindInteger:
		return json.Number(strconv.FormatInt(n.num, 10))
	case kindNumber:
		return json.Number(n.text)
	case kindString:
		return string(n.text)
	case kindArray:
		list := make([]any, len(n.elems))
		for i := range n.elems {
			list[i] = nodeAny(&n.elems[i])
		}
		return list
	case kindObject:
		return membersAny(n.members)
	}
	return nil
}

func membersAny(members []member) map[string]any {
	m := make(map[string]any, len(members))
	for i := range members {
		m[string(members[i].name)] = nodeAny(&members[i].value)
	}
	return m
}
