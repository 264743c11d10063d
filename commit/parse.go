package commit

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nodeKind says which fields of a node hold its value.
type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindFalse
	kindTrue
	kindInteger // num
	kindNumber  // text: the RFC 8785 form of an admitted non-integer
	kindString  // text: the decoded string
	kindArray   // elems
	kindObject  // members, sorted by name in UTF-16 code unit order
)

// node is one checked JSON value. The tree holds everything the canonical
// form needs and nothing of the input's spelling.
type node struct {
	kind    nodeKind
	num     int64
	text    []byte
	elems   []node
	members []member
}

type member struct {
	name   []byte
	offset int // of the name's opening quote, to report a duplicate
	value  node
}

// parser checks JSON text against a Domain and builds the node tree in one
// pass. It keeps the path to the value being parsed so that a refusal can
// name its JSON pointer; the pointer string is only built on refusal.
type parser struct {
	data   []byte
	pos    int
	depth  int
	path   []location
	domain Domain

	// Children of the open containers, innermost last. A container copies
	// its own into one exact allocation when it closes.
	elemStack   []node
	memberStack []member

	// normalize converts strings and names to NFC instead of refusing them
	// (NormalizeNFC). rfc8785 drops the domain's Unicode and number rules
	// and canonicalizes numbers as RFC 8785 does; it exists only so that
	// tests can hold the canonical writer to the RFC's reference vectors.
	normalize bool
	rfc8785   bool
}

func newParser(data []byte, d Domain) *parser {
	return &parser{data: data, domain: d}
}

// scratch holds a parser's stacks between calls, so that a steady stream
// of parameters parses without growing them again each time.
type scratch struct {
	path    []location
	elems   []node
	members []member
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledStack bounds the stacks kept for reuse: one huge document must
// not pin its stacks' memory forever.
const maxPooledStack = 1024

func (p *parser) takeScratch() *scratch {
	s := scratchPool.Get().(*scratch)
	p.path, p.elemStack, p.memberStack = s.path[:0], s.elems[:0], s.members[:0]
	return s
}

// returnScratch clears what the stacks still reference (after a refusal,
// parts of the input) and pools them.
func (p *parser) returnScratch(s *scratch) {
	if cap(p.path) > maxPooledStack || cap(p.elemStack) > maxPooledStack || cap(p.memberStack) > maxPooledStack {
		return
	}
	clear(p.path)
	clear(p.elemStack)
	clear(p.memberStack)
	s.path, s.elems, s.members = p.path[:0], p.elemStack[:0], p.memberStack[:0]
	p.path, p.elemStack, p.memberStack = nil, nil, nil
	scratchPool.Put(s)
}

func (p *parser) fail(kind Kind, offset int) error {
	return &DomainError{Kind: kind, Pointer: pointer(p.path), Offset: offset}
}

func (p *parser) failKey(kind Kind, offset int) error {
	return &DomainError{Kind: kind, Pointer: pointer(p.path), Key: true, Offset: offset}
}

// parseDocument parses the whole input as one JSON value.
func (p *parser) parseDocument() (node, error) {
	if max := p.domain.maxBytes(); len(p.data) > max {
		return node{}, &DomainError{Kind: ErrTooLarge, Offset: max}
	}
	defer p.returnScratch(p.takeScratch())
	p.skipSpace()
	n, err := p.parseValue()
	if err != nil {
		return node{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return node{}, p.fail(ErrSyntax, p.pos)
	}
	return n, nil
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) parseValue() (node, error) {
	if p.pos >= len(p.data) {
		return node{}, p.fail(ErrSyntax, p.pos)
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.parseObject()
	case c == '[':
		return p.parseArray()
	case c == '"':
		start := p.pos
		s, kind, at := p.parseString()
		if kind != "" {
			return node{}, p.fail(kind, at)
		}
		if s, kind = p.checkText(s); kind != "" {
			return node{}, p.fail(kind, start)
		}
		return node{kind: kindString, text: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		return p.parseNumber()
	default:
		for _, lit := range [...]struct {
			text string
			kind nodeKind
		}{{"true", kindTrue}, {"false", kindFalse}, {"null", kindNull}} {
			if len(p.data)-p.pos >= len(lit.text) && string(p.data[p.pos:p.pos+len(lit.text)]) == lit.text {
				p.pos += len(lit.text)
				return node{kind: lit.kind}, nil
			}
		}
		return node{}, p.fail(ErrSyntax, p.pos)
	}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.domain.maxDepth() {
		return p.fail(ErrTooDeep, p.pos)
	}
	return nil
}

func (p *parser) parseArray() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	p.pos++ // '['
	base := len(p.elemStack)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return node{kind: kindArray, elems: []node{}}, nil
	}
	for {
		p.path = append(p.path, location{index: len(p.elemStack) - base})
		p.skipSpace()
		n, err := p.parseValue()
		if err != nil {
			return node{}, err
		}
		p.path = p.path[:len(p.path)-1]
		p.elemStack = append(p.elemStack, n)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.fail(ErrSyntax, p.pos)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			elems := slices.Clone(p.elemStack[base:])
			clear(p.elemStack[base:])
			p.elemStack = p.elemStack[:base]
			return node{kind: kindArray, elems: elems}, nil
		default:
			return node{}, p.fail(ErrSyntax, p.pos)
		}
	}
}

func (p *parser) parseObject() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	p.pos++ // '{'
	base := len(p.memberStack)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return node{kind: kindObject, members: []member{}}, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return node{}, p.failKey(ErrSyntax, p.pos)
		}
		start := p.pos
		name, kind, at := p.parseString()
		if kind != "" {
			return node{}, p.failKey(kind, at)
		}
		if name, kind = p.checkText(name); kind != "" {
			return node{}, p.failKey(kind, start)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return node{}, p.failKey(ErrSyntax, p.pos)
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, location{name: name, isKey: true})
		n, err := p.parseValue()
		if err != nil {
			return node{}, err
		}
		p.path = p.path[:len(p.path)-1]
		p.memberStack = append(p.memberStack, member{name: name, offset: start, value: n})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.fail(ErrSyntax, p.pos)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			members := slices.Clone(p.memberStack[base:])
			clear(p.memberStack[base:])
			p.memberStack = p.memberStack[:base]
			if err := p.sortMembers(members); err != nil {
				return node{}, err
			}
			return node{kind: kindObject, members: members}, nil
		default:
			return node{}, p.fail(ErrSyntax, p.pos)
		}
	}
}

// sortMembers puts members in canonical order and refuses duplicate names,
// reporting the later of the two occurrences.
func (p *parser) sortMembers(members []member) error {
	if dup := sortMembers(members); dup >= 0 {
		a, b := members[dup-1], members[dup]
		p.path = append(p.path, location{name: b.name, isKey: true})
		return p.fail(ErrDuplicateKey, max(a.offset, b.offset))
	}
	return nil
}

// sortMembers sorts members by name in UTF-16 code unit order (RFC 8785
// section 3.2.3) and returns the index of the second of two equal names, or
// -1 when all names differ.
func sortMembers(members []member) int {
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].name, members[i].name) {
			return i
		}
	}
	return -1
}

// compareUTF16 orders two valid UTF-8 strings as their UTF-16 encodings
// compare code unit by code unit. UTF-8 byte order equals code point order,
// which differs from UTF-16 order only where a supplementary character
// (encoded as surrogates, 0xD800–0xDFFF) meets one in U+E000–U+FFFF, so the
// strings are compared bytewise up to their first difference and only the
// two characters found there are converted.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Key(ra)) - int(utf16Key(rb))
}

// utf16Key returns a key that orders runes as their UTF-16 encodings
// order: the first code unit in the high bits, and for a supplementary rune
// the low ten bits of its low surrogate below it. A supplementary rune thus
// sorts above U+D7FF and below U+E000, as its high surrogate does.
func utf16Key(r rune) rune {
	if r < 0x10000 {
		return r << 10
	}
	hi, lo := utf16.EncodeRune(r)
	return hi<<10 | lo&0x3ff
}

// checkText applies the domain's Unicode rules to a decoded string: no
// code point whose normalization depends on the Unicode version, then NFC.
func (p *parser) checkText(s []byte) ([]byte, Kind) {
	if p.rfc8785 || isASCII(s) {
		return s, ""
	}
	if hasUnstableNormalization(s) {
		return nil, ErrUnstableNormalization
	}
	if norm.NFC.IsNormal(s) {
		return s, ""
	}
	if p.normalize {
		return norm.NFC.Bytes(s), ""
	}
	return nil, ErrNotNFC
}

func isASCII(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// parseString decodes the string whose opening quote is at p.pos. Without
// escapes the result is a slice of the input, which must not change while
// the tree is in use. On a refusal it returns the kind and the offset of
// the offending byte.
func (p *parser) parseString() ([]byte, Kind, int) {
	p.pos++ // '"'
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			raw := p.data[start:p.pos]
			p.pos++
			if bad := invalidUTF8At(raw); bad >= 0 {
				return nil, ErrInvalidUTF8, start + bad
			}
			return raw, "", 0
		case c == '\\':
			return p.parseEscapedString(start)
		case c < 0x20:
			return nil, ErrSyntax, p.pos
		}
		p.pos++
	}
	return nil, ErrSyntax, p.pos
}

// invalidUTF8At returns the offset of the first byte of b that does not
// begin a well-formed UTF-8 sequence, or -1.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

func (p *parser) parseEscapedString(start int) ([]byte, Kind, int) {
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.data[start:p.pos]...)
	if bad := invalidUTF8At(buf); bad >= 0 {
		return nil, ErrInvalidUTF8, start + bad
	}
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return buf, "", 0
		case c < 0x20:
			return nil, ErrSyntax, p.pos
		case c < utf8.RuneSelf && c != '\\':
			buf = append(buf, c)
			p.pos++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, ErrInvalidUTF8, p.pos
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		default: // backslash
			at := p.pos
			if p.pos+1 >= len(p.data) {
				return nil, ErrSyntax, at
			}
			e := p.data[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return nil, ErrSyntax, at
				}
				if utf16.IsSurrogate(r) {
					lo, ok := rune(0), false
					if r < 0xDC00 && p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
						p.pos += 2
						if lo, ok = p.hex4(); !ok {
							return nil, ErrSyntax, p.pos - 2
						}
						ok = lo >= 0xDC00 && lo <= 0xDFFF
					}
					if !ok {
						return nil, ErrLoneSurrogate, at
					}
					r = utf16.DecodeRune(r, lo)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return nil, ErrSyntax, at
			}
		}
	}
	return nil, ErrSyntax, p.pos
}

// hex4 reads four hexadecimal digits (either case) at p.pos.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// plainInteger reads the common case fast: a token of at most 15 digits,
// with an optional minus sign and no fraction or exponent, which is always
// a safe integer.
func plainInteger(tok []byte) (int64, bool) {
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseNumber scans a number per the RFC 8259 grammar
//
//	number = [ "-" ] int [ frac ] [ exp ]
//	int    = "0" / ( digit1-9 *DIGIT )
//	frac   = "." 1*DIGIT
//	exp    = ("e" / "E") [ "-" / "+" ] 1*DIGIT
//
// and then applies the domain's number rules to its exact decimal value.
func (p *parser) parseNumber() (node, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return node{}, p.fail(ErrSyntax, start)
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return node{}, p.fail(ErrSyntax, start)
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return node{}, p.fail(ErrSyntax, start)
		}
	}
	if n, ok := plainInteger(p.data[start:p.pos]); ok && !p.rfc8785 {
		return node{kind: kindInteger, num: n}, nil
	}
	n, kind := numberNode(string(p.data[start:p.pos]), p.domain.AllowNonInteger, p.rfc8785)
	if kind != "" {
		return node{}, p.fail(kind, start)
	}
	return n, nil
}
