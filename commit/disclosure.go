package commit

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
)

// A Disclosure opens a version 2 commitment: every field's commitment, and
// for the disclosed fields the canonical value and the opening. Hide
// returns one with every field disclosed; Only keeps a subset to hand to
// an auditor; deleting the file of the whole one is erasure
// (docs/operations.md). Its String and log forms are redacted: a
// disclosure holds raw values.
type Disclosure struct {
	// Commitment is what the field commitments hash to; Check compares it
	// with an entry's.
	Commitment Commitment
	fields     []disclosedField // in canonical (UTF-16) order of name
}

type disclosedField struct {
	name       []byte // as decoded
	commitment [sha256.Size]byte
	disclosed  bool
	value      []byte // canonical JSON
	opening    Opening
}

// DisclosureFormat is the value of a disclosure file's "disclosure"
// member: the commitment version it opens.
const DisclosureFormat = 2

// String returns a summary without values or openings.
func (x *Disclosure) String() string {
	return fmt.Sprintf("commit.Disclosure(%d fields, %d disclosed)", len(x.fields), len(x.Disclosed()))
}

// LogValue keeps values and openings out of structured logs.
func (x *Disclosure) LogValue() slog.Value { return slog.StringValue(x.String()) }

// Fields returns the names of every committed field, in canonical order.
func (x *Disclosure) Fields() []string {
	names := make([]string, len(x.fields))
	for i := range x.fields {
		names[i] = string(x.fields[i].name)
	}
	return names
}

// Disclosed returns the names of the fields whose value is disclosed.
func (x *Disclosure) Disclosed() []string { return x.names(true) }

// Hidden returns the names of the fields whose value stays hidden.
func (x *Disclosure) Hidden() []string { return x.names(false) }

func (x *Disclosure) names(disclosed bool) []string {
	names := []string{}
	for i := range x.fields {
		if x.fields[i].disclosed == disclosed {
			names = append(names, string(x.fields[i].name))
		}
	}
	return names
}

func (x *Disclosure) field(name string) *disclosedField {
	for i := range x.fields {
		if string(x.fields[i].name) == name {
			return &x.fields[i]
		}
	}
	return nil
}

// Value returns a disclosed field's canonical JSON value.
func (x *Disclosure) Value(name string) ([]byte, bool) {
	if f := x.field(name); f != nil && f.disclosed {
		return f.value, true
	}
	return nil, false
}

// Opening returns a disclosed field's opening, so that a Disclosure is an
// OpeningSource: a call committed again with the openings of an earlier
// one (an approved call, retried) gets the same commitment if and only if
// its parameters are the same. A field the disclosure does not open is an
// error: the new parameters are not the ones committed to.
func (x *Disclosure) Opening(name string) (Opening, error) {
	if f := x.field(name); f != nil && f.disclosed {
		return f.opening, nil
	}
	return Opening{}, &DisclosureError{Kind: ErrFieldNotOpened, Field: name}
}

// Params returns the canonical form of the whole parameters, when every
// field is disclosed: what ledger-verify params and minimization take.
func (x *Disclosure) Params() ([]byte, bool) {
	b := []byte{'{'}
	for i := range x.fields {
		f := &x.fields[i]
		if !f.disclosed {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.name)
		b = append(b, ':')
		b = append(b, f.value...)
	}
	return append(b, '}'), true
}

// Only returns a copy of x that discloses just the named fields (each of
// them disclosed in x) and keeps every field's commitment.
func (x *Disclosure) Only(names ...string) (*Disclosure, error) {
	for _, n := range names {
		if f := x.field(n); f == nil || !f.disclosed {
			return nil, &DisclosureError{Kind: ErrFieldNotOpened, Field: n}
		}
	}
	y := &Disclosure{Commitment: x.Commitment, fields: slices.Clone(x.fields)}
	for i := range y.fields {
		if !slices.Contains(names, string(y.fields[i].name)) {
			y.fields[i].disclosed, y.fields[i].value, y.fields[i].opening = false, nil, Opening{}
		}
	}
	return y, nil
}

// Check verifies x against a commitment c from an entry: c must be a
// version 2 commitment, x's field commitments must hash to it, and each
// disclosed value with its opening must give its field's commitment. The
// first failure is a *DisclosureError naming the field; nothing of a value
// is in it.
func (x *Disclosure) Check(c Commitment) error {
	if !c.Hiding {
		return &DisclosureError{Kind: ErrNotHiding}
	}
	if !x.commitMap().Equal(c) {
		return &DisclosureError{Kind: ErrCommitmentMismatch}
	}
	var buf []byte
	for i := range x.fields {
		f := &x.fields[i]
		if !f.disclosed {
			continue
		}
		var got [sha256.Size]byte
		buf, got = fieldCommitment(buf, f.opening, f.name, f.value)
		if subtle.ConstantTimeCompare(got[:], f.commitment[:]) != 1 {
			return &DisclosureError{Kind: ErrFieldMismatch, Field: string(f.name)}
		}
	}
	return nil
}

// MarshalJSON writes the disclosure file (docs/commitment.md §7.4), in
// canonical form:
//
//	{"disclosure":2,"fields":{NAME:{"commitment":HEX,"opening":HEX,"value":VALUE},...},
//	 "params_digest":"v2:sha256:HEX","params_size":N}
//
// with "opening" and "value" only for disclosed fields. The file is as
// secret as the values it discloses.
func (x *Disclosure) MarshalJSON() ([]byte, error) {
	b := []byte(`{"disclosure":` + strconv.Itoa(DisclosureFormat) + `,"fields":{`)
	for i := range x.fields {
		f := &x.fields[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.name)
		b = append(b, `:{"commitment":"`...)
		b = hex.AppendEncode(b, f.commitment[:])
		b = append(b, '"')
		if f.disclosed {
			b = append(b, `,"opening":"`...)
			b = hex.AppendEncode(b, f.opening[:])
			b = append(b, `","value":`...)
			b = append(b, f.value...)
		}
		b = append(b, '}')
	}
	b = append(b, `},"params_digest":"`...)
	b = x.Commitment.AppendDigestText(b)
	b = append(b, `","params_size":`...)
	b = strconv.AppendInt(b, int64(x.Commitment.Size), 10)
	return append(b, '}'), nil
}

// ParseDisclosure reads a disclosure file. Values are held to the domain d
// (the one the parameters were committed in); the file's own members to
// exactly the form MarshalJSON writes, in any order and spacing. Its
// params_digest and params_size must be what its field commitments hash
// to. Refusals are *DisclosureError of kind ErrDisclosureMalformed with
// the JSON pointer of the fault (wrapping the *DomainError of a value
// outside d).
func ParseDisclosure(data []byte, d Domain) (*Disclosure, error) {
	file := d
	file.MaxBytes = 4*d.maxBytes() + 1<<16 // commitments and openings beside the values
	file.MaxDepth = d.maxDepth() + 2       // fields → NAME → value
	root, err := file.parseObject(data)
	if err != nil {
		return nil, &DisclosureError{Kind: ErrDisclosureMalformed, Pointer: pointerOf(err), Problem: "outside the strict domain", Err: err}
	}
	malformed := func(ptr, problem string) error {
		return &DisclosureError{Kind: ErrDisclosureMalformed, Pointer: ptr, Problem: problem}
	}
	wantMembers := []string{"disclosure", "fields", "params_digest", "params_size"}
	fieldMembers := []string{"commitment", "opening", "value"}
	top, ok := membersNamed(&root, wantMembers)
	if !ok {
		return nil, malformed("", fmt.Sprintf("unknown member (want %q)", wantMembers))
	}
	format, fields, digestText, size := top[0], top[1], top[2], top[3]
	switch {
	case format == nil || fields == nil || digestText == nil || size == nil:
		return nil, malformed("", fmt.Sprintf("missing a member (want %q)", wantMembers))
	case format.kind != kindInteger || format.num != DisclosureFormat:
		return nil, malformed("/disclosure", "not 2, the only disclosure format")
	case fields.kind != kindObject:
		return nil, malformed("/fields", "not an object")
	case digestText.kind != kindString:
		return nil, malformed("/params_digest", "not a string")
	case size.kind != kindInteger:
		return nil, malformed("/params_size", "not an integer")
	}
	x := &Disclosure{fields: make([]disclosedField, len(fields.members))}
	for i := range fields.members {
		m := &fields.members[i]
		ptr := "/fields/" + escapeName(m.name)
		if m.value.kind != kindObject {
			return nil, malformed(ptr, "not an object")
		}
		f := &x.fields[i]
		f.name = m.name
		fm, ok := membersNamed(&m.value, fieldMembers)
		if !ok {
			return nil, malformed(ptr, fmt.Sprintf("unknown member (want %q)", fieldMembers))
		}
		commitment, opening, value := fm[0], fm[1], fm[2]
		if commitment == nil {
			return nil, malformed(ptr, `no "commitment"`)
		}
		if !decodeHex32(commitment, &f.commitment) {
			return nil, malformed(ptr+"/commitment", "not 64 lower-case hex digits")
		}
		if (opening == nil) != (value == nil) {
			return nil, malformed(ptr, `"opening" and "value" come together or not at all`)
		}
		if opening != nil {
			if !decodeHex32(opening, (*[sha256.Size]byte)(&f.opening)) {
				return nil, malformed(ptr+"/opening", "not 64 lower-case hex digits")
			}
			f.disclosed, f.value = true, appendCanonical(nil, value)
		}
	}
	x.Commitment = x.commitMap()
	dg, hiding, err := ParseParamsDigest(string(digestText.text))
	if err != nil || !hiding {
		return nil, malformed("/params_digest", `not "v2:sha256:" and 64 lower-case hex digits`)
	}
	if !x.Commitment.Equal(Commitment{Digest: dg, Size: int(size.num), Hiding: true}) {
		return nil, &DisclosureError{Kind: ErrDisclosureMalformed, Pointer: "/params_digest", Problem: "the field commitments do not hash to the file's own params_digest and params_size"}
	}
	return x, nil
}

// membersNamed returns the values of obj's members called names, in that
// order (nil for an absent one), and false if obj has a member of another
// name.
func membersNamed(obj *node, names []string) ([]*node, bool) {
	out := make([]*node, len(names))
	for i := range obj.members {
		j := slices.Index(names, string(obj.members[i].name))
		if j < 0 {
			return nil, false
		}
		out[j] = &obj.members[i].value
	}
	return out, true
}

func decodeHex32(n *node, out *[sha256.Size]byte) bool {
	if n.kind != kindString || len(n.text) != 2*sha256.Size {
		return false
	}
	for _, c := range n.text {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(out[:], n.text)
	return err == nil
}

func escapeName(name []byte) string {
	return pointer([]location{{name: name, isKey: true}})[1:]
}

func pointerOf(err error) string {
	var de *DomainError
	if errors.As(err, &de) {
		return de.Pointer
	}
	return ""
}
