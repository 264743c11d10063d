package commit

import "strconv"

// Default bounds of a zero Domain.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxDepth = 64

	// maxInputBytes caps MaxBytes: 1 GiB keeps every offset and exponent
	// computation far from overflow.
	maxInputBytes = 1 << 30
)

// Domain is the strict input domain. Its zero value is the default domain
// that parameter digests use: integers only, DefaultMaxBytes and
// DefaultMaxDepth.
type Domain struct {
	// MaxBytes bounds the input's length in bytes (for Go values, the
	// canonical form's length). Optional; 0 means DefaultMaxBytes. Values
	// above 1 GiB are treated as 1 GiB.
	MaxBytes int
	// MaxDepth bounds how many arrays and objects may enclose one another:
	// {"a":[1]} has depth 2, a scalar document depth 0. Optional; 0 means
	// DefaultMaxDepth.
	MaxDepth int
	// AllowNonInteger admits numbers with a fractional part, in their
	// RFC 8785 form, provided that form denotes exactly the decimal value
	// written (0.5 and 2.50e-1 are admitted, 0.10000000000000000001 is
	// refused with ErrInexactNumber). Optional; off by default, because an
	// amount is better sent as an integer in minor units.
	AllowNonInteger bool
}

func (d Domain) maxBytes() int {
	switch {
	case d.MaxBytes <= 0:
		return DefaultMaxBytes
	case d.MaxBytes > maxInputBytes:
		return maxInputBytes
	}
	return d.MaxBytes
}

func (d Domain) maxDepth() int {
	if d.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return d.MaxDepth
}

// Canonicalize checks that data is one JSON value inside the domain and
// returns its RFC 8785 canonical form. Input outside the domain is refused
// with a *DomainError; nothing is normalized.
func (d Domain) Canonicalize(data []byte) ([]byte, error) {
	p := newParser(data, d)
	n, err := p.parseDocument()
	if err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(data)), &n), nil
}

// NormalizeNFC is Canonicalize, except that strings and member names that
// are not in Unicode Normalization Form C are converted to it instead of
// being refused. It exists for callers who decide, on purpose, that
// canonically equivalent text is the same parameter; the result can then
// pass Canonicalize. Names that become equal once normalized are refused
// with ErrDuplicateKey.
func (d Domain) NormalizeNFC(data []byte) ([]byte, error) {
	p := newParser(data, d)
	p.normalize = true
	n, err := p.parseDocument()
	if err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(data)), &n), nil
}

// Canonicalize is Domain{}.Canonicalize.
func Canonicalize(data []byte) ([]byte, error) { return Domain{}.Canonicalize(data) }

// NormalizeNFC is Domain{}.NormalizeNFC.
func NormalizeNFC(data []byte) ([]byte, error) { return Domain{}.NormalizeNFC(data) }

// appendCanonical appends the RFC 8785 form of n to b: no insignificant
// whitespace, members in UTF-16 order (already sorted by the parser),
// numbers in ECMAScript form, and strings escaped as RFC 8785 section 3.2.2.2
// requires.
func appendCanonical(b []byte, n *node) []byte {
	switch n.kind {
	case kindNull:
		return append(b, "null"...)
	case kindFalse:
		return append(b, "false"...)
	case kindTrue:
		return append(b, "true"...)
	case kindInteger:
		return strconv.AppendInt(b, n.num, 10)
	case kindNumber:
		return append(b, n.text...)
	case kindString:
		return appendString(b, n.text)
	case kindArray:
		b = append(b, '[')
		for i := range n.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, &n.elems[i])
		}
		return append(b, ']')
	default: // kindObject
		b = append(b, '{')
		for i := range n.members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n.members[i].name)
			b = append(b, ':')
			b = appendCanonical(b, &n.members[i].value)
		}
		return append(b, '}')
	}
}

// canonicalLen returns the length of appendCanonical's form of n, so that
// a caller can allocate it at once.
func canonicalLen(n *node) int {
	switch n.kind {
	case kindNull, kindTrue:
		return len("null")
	case kindFalse:
		return len("false")
	case kindInteger:
		var digits [20]byte
		return len(strconv.AppendInt(digits[:0], n.num, 10))
	case kindNumber:
		return len(n.text)
	case kindString:
		return stringLen(n.text)
	case kindArray:
		l := len("[]") + max(len(n.elems)-1, 0) // and the commas
		for i := range n.elems {
			l += canonicalLen(&n.elems[i])
		}
		return l
	default: // kindObject
		l := len("{}") + max(len(n.members)-1, 0)
		for i := range n.members {
			l += stringLen(n.members[i].name) + len(":") + canonicalLen(&n.members[i].value)
		}
		return l
	}
}

// stringLen returns the length of appendString's form of s: its quotes,
// and each escape's extra characters.
func stringLen(s []byte) int {
	l := len(s) + len(`""`)
	for _, c := range s {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			l++ // \x
		case c < 0x20:
			l += len(`\u00xx`) - 1
		}
	}
	return l
}

// appendString writes s as RFC 8785 requires: the two-character escapes
// \" \\ \b \f \n \r \t, \u00xx (lower-case hex) for other control
// characters, and every other character as itself in UTF-8.
func appendString(b []byte, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendString appends s to b as an RFC 8785 JSON string, after checking
// that s lies inside the domain: well-formed UTF-8 in Unicode NFC. It lets
// other formats (entries) write canonical JSON without a second parser. A
// refusal is a *DomainError with an empty pointer and Offset -1; the caller
// knows which field it was writing.
func AppendString(b []byte, s string) ([]byte, error) {
	text, kind := goText(s)
	if kind != "" {
		return b, &DomainError{Kind: kind, Offset: -1}
	}
	return appendString(b, text), nil
}
