package commit

import (
	"encoding/json"
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// CanonicalizeValue checks a Go value against the domain and returns the
// RFC 8785 form of the JSON value it stands for. It accepts:
//
//   - nil, bool and string;
//   - json.Number, held to the JSON number grammar and the domain's number
//     rules exactly as in JSON text;
//   - every signed and unsigned integer type, within ±MaxSafeInteger;
//   - float32 and float64 whose value is an integer within ±MaxSafeInteger,
//     and, when AllowNonInteger is set, other finite values, written in the
//     shortest form that reads back as the same float64;
//   - maps with string keys and slices or arrays of any accepted value
//     (nil maps and slices are null, as encoding/json has them).
//
// Anything else, pointers and structs included, is refused with
// ErrUnsupportedType: their JSON form depends on encoders and tags, and the
// commitment must not. Refusals carry Offset -1.
func (d Domain) CanonicalizeValue(v any) ([]byte, error) {
	n, err := d.valueNode(v)
	if err != nil {
		return nil, err
	}
	return d.appendBounded(&n)
}

// ParamsValue is Params for parameters held as a Go value (normally a
// map[string]any).
func (d Domain) ParamsValue(v any) (Commitment, error) {
	n, err := d.valueNode(v)
	if err != nil {
		return Commitment{}, err
	}
	if n.kind != kindObject {
		return Commitment{}, &DomainError{Kind: ErrNotObject, Offset: -1}
	}
	c := commitNode(&n, 0)
	if max := d.maxBytes(); c.Size > max {
		return Commitment{}, &DomainError{Kind: ErrTooLarge, Offset: -1}
	}
	return c, nil
}

// CanonicalizeValue is Domain{}.CanonicalizeValue.
func CanonicalizeValue(v any) ([]byte, error) { return Domain{}.CanonicalizeValue(v) }

// ParamsValue is Domain{}.ParamsValue.
func ParamsValue(v any) (Commitment, error) { return Domain{}.ParamsValue(v) }

func (d Domain) valueNode(v any) (node, error) {
	c := valueConverter{domain: d}
	return c.convert(v)
}

// appendBounded writes the canonical form, refusing it past MaxBytes.
func (d Domain) appendBounded(n *node) ([]byte, error) {
	b := appendCanonical(nil, n)
	if max := d.maxBytes(); len(b) > max {
		return nil, &DomainError{Kind: ErrTooLarge, Offset: -1}
	}
	return b, nil
}

type valueConverter struct {
	domain Domain
	depth  int
	path   []location
}

func (c *valueConverter) fail(kind Kind) error {
	return &DomainError{Kind: kind, Pointer: pointer(c.path), Offset: -1}
}

func (c *valueConverter) failKey(kind Kind) error {
	return &DomainError{Kind: kind, Pointer: pointer(c.path), Key: true, Offset: -1}
}

// goText checks a Go string against the domain's text rules.
func goText(s string) ([]byte, Kind) {
	if !utf8.ValidString(s) {
		return nil, ErrInvalidUTF8
	}
	p := parser{}
	return p.checkText([]byte(s))
}

func (c *valueConverter) convert(v any) (node, error) {
	switch v := v.(type) {
	case nil:
		return node{kind: kindNull}, nil
	case bool:
		if v {
			return node{kind: kindTrue}, nil
		}
		return node{kind: kindFalse}, nil
	case string:
		s, kind := goText(v)
		if kind != "" {
			return node{}, c.fail(kind)
		}
		return node{kind: kindString, text: s}, nil
	case json.Number:
		p := parser{data: []byte(v), domain: c.domain}
		if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return node{}, c.fail(ErrSyntax)
		}
		n, err := p.parseNumber()
		if err != nil {
			return node{}, c.fail(err.(*DomainError).Kind)
		}
		if p.pos != len(v) {
			return node{}, c.fail(ErrSyntax)
		}
		return n, nil
	case float64:
		return c.float(v)
	case float32:
		return c.float(float64(v))
	case map[string]any:
		if v == nil {
			return node{kind: kindNull}, nil
		}
		if err := c.enter(); err != nil {
			return node{}, err
		}
		members := make([]member, 0, len(v))
		for name, elem := range v {
			m, err := c.member(name, elem)
			if err != nil {
				return node{}, err
			}
			members = append(members, m)
		}
		return c.object(members)
	case []any:
		if v == nil {
			return node{kind: kindNull}, nil
		}
		if err := c.enter(); err != nil {
			return node{}, err
		}
		elems := make([]node, len(v))
		for i, elem := range v {
			n, err := c.element(i, elem)
			if err != nil {
				return node{}, err
			}
			elems[i] = n
		}
		c.depth--
		return node{kind: kindArray, elems: elems}, nil
	}
	return c.reflect(reflect.ValueOf(v))
}

// reflect converts the integer, map, slice and array types that the type
// switch in convert does not name.
func (c *valueConverter) reflect(rv reflect.Value) (node, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i := rv.Int()
		if i > MaxSafeInteger || i < -MaxSafeInteger {
			return node{}, c.fail(ErrIntegerRange)
		}
		return node{kind: kindInteger, num: i}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > MaxSafeInteger {
			return node{}, c.fail(ErrIntegerRange)
		}
		return node{kind: kindInteger, num: int64(u)}, nil
	case reflect.String:
		return c.convert(rv.String())
	case reflect.Bool:
		return c.convert(rv.Bool())
	case reflect.Float32, reflect.Float64:
		return c.float(rv.Float())
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		if rv.IsNil() {
			return node{kind: kindNull}, nil
		}
		if err := c.enter(); err != nil {
			return node{}, err
		}
		members := make([]member, 0, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m, err := c.member(it.Key().String(), it.Value().Interface())
			if err != nil {
				return node{}, err
			}
			members = append(members, m)
		}
		return c.object(members)
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			break // encoding/json would write base64 text: too easy to misread
		}
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return node{kind: kindNull}, nil
		}
		if err := c.enter(); err != nil {
			return node{}, err
		}
		elems := make([]node, rv.Len())
		for i := range elems {
			n, err := c.element(i, rv.Index(i).Interface())
			if err != nil {
				return node{}, err
			}
			elems[i] = n
		}
		c.depth--
		return node{kind: kindArray, elems: elems}, nil
	}
	err := c.fail(ErrUnsupportedType).(*DomainError)
	if rv.IsValid() {
		err.GoType = rv.Type().String()
	}
	return node{}, err
}

func (c *valueConverter) float(f float64) (node, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return node{}, c.fail(ErrNonFinite)
	}
	if f == math.Trunc(f) {
		if math.Abs(f) > MaxSafeInteger {
			return node{}, c.fail(ErrIntegerRange)
		}
		return node{kind: kindInteger, num: int64(f)}, nil
	}
	if !c.domain.AllowNonInteger {
		return node{}, c.fail(ErrNonInteger)
	}
	text, err := jcs.NumberToJSON(f)
	if err != nil {
		return node{}, c.fail(ErrNonFinite)
	}
	return node{kind: kindNumber, text: []byte(text)}, nil
}

func (c *valueConverter) enter() error {
	c.depth++
	if c.depth > c.domain.maxDepth() {
		return c.fail(ErrTooDeep)
	}
	return nil
}

func (c *valueConverter) member(name string, v any) (member, error) {
	text, kind := goText(name)
	if kind != "" {
		return member{}, c.failKey(kind)
	}
	c.path = append(c.path, location{name: text, isKey: true})
	n, err := c.convert(v)
	c.path = c.path[:len(c.path)-1]
	return member{name: text, offset: -1, value: n}, err
}

func (c *valueConverter) element(i int, v any) (node, error) {
	c.path = append(c.path, location{index: i})
	n, err := c.convert(v)
	c.path = c.path[:len(c.path)-1]
	return n, err
}

// object finishes an object whose members were converted from a Go map.
// Keys are checked, never transformed, so distinct map keys stay distinct
// and sorting cannot find a duplicate.
func (c *valueConverter) object(members []member) (node, error) {
	c.depth--
	sortMembers(members)
	return node{kind: kindObject, members: members}, nil
}
