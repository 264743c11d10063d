package commit

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind classifies why input lies outside the strict domain. Each Kind is
// also an error, so callers can test for it with errors.Is:
//
//	if errors.Is(err, commit.ErrDuplicateKey) { ... }
//
// The string of a Kind is stable and may be shown to users and recorded in
// metrics; it never contains input.
type Kind string

func (k Kind) Error() string { return string(k) }

// The kinds of refusal. Their string forms are part of the specification
// (docs/commitment.md) and of the equivalence corpus in testdata/.
const (
	// ErrSyntax: the input is not JSON text per RFC 8259 (including a byte
	// order mark, trailing content, an unescaped control character in a
	// string, or a number outside the JSON grammar).
	ErrSyntax Kind = "syntax"
	// ErrInvalidUTF8: a string or member name contains bytes that are not
	// well-formed UTF-8 (including encoded surrogates and overlong forms).
	ErrInvalidUTF8 Kind = "invalid_utf8"
	// ErrLoneSurrogate: a \u escape names a UTF-16 surrogate that is not part
	// of a high-then-low pair.
	ErrLoneSurrogate Kind = "lone_surrogate"
	// ErrDuplicateKey: an object has two members whose names are equal after
	// escapes are decoded ("a" and "\u0061" are the same name).
	ErrDuplicateKey Kind = "duplicate_key"
	// ErrUnstableNormalization: a string or member name holds a code point
	// whose normalization implementations with different Unicode versions
	// judge differently (docs/commitment.md §2.4). It is decided before
	// ErrNotNFC, and NormalizeNFC refuses it too.
	ErrUnstableNormalization Kind = "unstable_normalization"
	// ErrNotNFC: a string or member name is not in Unicode Normalization
	// Form C. NormalizeNFC converts on purpose; nothing converts silently.
	ErrNotNFC Kind = "not_nfc"
	// ErrIntegerRange: a number whose value is an integer lies outside
	// ±(2^53−1), where IEEE-754 doubles (and so most JSON parsers) stop
	// representing every integer exactly.
	ErrIntegerRange Kind = "integer_range"
	// ErrNonInteger: a number has a fractional part and the Domain does not
	// admit non-integer numbers.
	ErrNonInteger Kind = "non_integer"
	// ErrInexactNumber: a non-integer number (admitted by the Domain) whose
	// RFC 8785 form would denote a different decimal value than the one
	// written, such as 0.10000000000000000001 or 1e-400.
	ErrInexactNumber Kind = "inexact_number"
	// ErrNonFinite: a Go float is NaN or an infinity.
	ErrNonFinite Kind = "non_finite"
	// ErrTooDeep: arrays and objects are nested deeper than the Domain's
	// bound.
	ErrTooDeep Kind = "too_deep"
	// ErrTooLarge: the input (or, for Go values, the canonical form) is
	// longer than the Domain's bound.
	ErrTooLarge Kind = "too_large"
	// ErrNotObject: parameters must be a JSON object at the top level.
	ErrNotObject Kind = "not_object"
	// ErrUnsupportedType: a Go value of a type with no single JSON meaning
	// (a struct, a pointer, []byte, a map with non-string keys, ...).
	ErrUnsupportedType Kind = "unsupported_type"
)

// DomainError reports input refused by the strict domain. It names where the
// fault is and what kind it is, and never carries the offending value.
type DomainError struct {
	Kind Kind
	// Pointer is the RFC 6901 JSON pointer of the offending value ("" is the
	// whole document). When Key is true, the fault is in a member name of
	// the object at Pointer, and the name itself is not repeated here.
	Pointer string
	Key     bool
	// Offset is the byte offset in the input at which the offending token
	// starts, or -1 when the input was a Go value.
	Offset int
	// GoType names the Go type refused by ErrUnsupportedType.
	GoType string
}

func (e *DomainError) Error() string {
	var b strings.Builder
	b.WriteString("commit: ")
	b.WriteString(string(e.Kind))
	if e.Key {
		b.WriteString(" in a member name of the object at ")
	} else {
		b.WriteString(" at ")
	}
	b.WriteString(strconv.Quote(e.Pointer))
	if e.GoType != "" {
		fmt.Fprintf(&b, " (Go type %s)", e.GoType)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " (byte %d)", e.Offset)
	}
	return b.String()
}

// Unwrap returns the Kind, so errors.Is(err, ErrNotNFC) and the like work.
func (e *DomainError) Unwrap() error { return e.Kind }

// location is one step of a path from the document root: a member name or
// an array index.
type location struct {
	name  []byte
	index int
	isKey bool
}

// pointer renders a path as an RFC 6901 JSON pointer.
func pointer(path []location) string {
	if len(path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, l := range path {
		b.WriteByte('/')
		if !l.isKey {
			b.WriteString(strconv.Itoa(l.index))
			continue
		}
		for i := 0; i < len(l.name); i++ {
			switch c := l.name[i]; c {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

// DisclosureKind classifies why a disclosure does not open a commitment.
// Its string is stable and never contains input.
type DisclosureKind string

func (k DisclosureKind) Error() string { return string(k) }

// The kinds of disclosure refusal (docs/commitment.md §7.4).
const (
	// ErrDisclosureMalformed: the disclosure file is not in the form
	// docs/commitment.md §7.4 gives.
	ErrDisclosureMalformed DisclosureKind = "malformed"
	// ErrNotHiding: the commitment is a version 1 digest, which has no
	// openings; check it with the raw parameters instead.
	ErrNotHiding DisclosureKind = "not_hiding"
	// ErrCommitmentMismatch: the field commitments do not hash to the
	// commitment: the disclosure is of other parameters (another entry's,
	// or a field's commitment replaced).
	ErrCommitmentMismatch DisclosureKind = "commitment_mismatch"
	// ErrFieldMismatch: a disclosed value and its opening do not give the
	// field's commitment: the value or the opening was changed, or both
	// were taken from another call.
	ErrFieldMismatch DisclosureKind = "field_mismatch"
	// ErrFieldNotOpened: a field the operation needs is not disclosed (or
	// not committed at all).
	ErrFieldNotOpened DisclosureKind = "field_not_opened"
)

// DisclosureError reports a disclosure that does not open a commitment.
// Field names the field at fault, if one is; Pointer the place in a
// disclosure file. It never carries a value or an opening.
type DisclosureError struct {
	Kind    DisclosureKind
	Field   string
	Pointer string
	Problem string
	Err     error
}

func (e *DisclosureError) Error() string {
	var b strings.Builder
	b.WriteString("commit: disclosure: ")
	b.WriteString(string(e.Kind))
	if e.Field != "" {
		fmt.Fprintf(&b, " in field %q", e.Field)
	}
	if e.Pointer != "" || e.Kind == ErrDisclosureMalformed {
		fmt.Fprintf(&b, " at %q", e.Pointer)
	}
	if e.Problem != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrFieldMismatch) and the like work.
func (e *DisclosureError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause, a *DomainError for a value outside
// the domain.
func (e *DisclosureError) Unwrap() error { return e.Err }
