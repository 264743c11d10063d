package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
)

// Line is one line of the generator's output.
type Line struct {
	Index           int    `json:"index"`
	Input           []byte `json:"input_base64"`
	AllowNonInteger bool   `json:"allow_non_integer,omitempty"`
	Digest          string `json:"digest,omitempty"`
	Size            int    `json:"size,omitempty"`
	Refusal         string `json:"refusal,omitempty"`
	Pointer         string `json:"pointer,omitempty"`
	Key             bool   `json:"key,omitempty"`
}

// Write writes n lines for seed.
func Write(w io.Writer, seed uint64, n int) error {
	for i := range n {
		b, err := json.Marshal(Generate(seed, i))
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// Generate makes text i of seed and runs it through package commit.
func Generate(seed uint64, i int) Line {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(i)))}
	input, allow := g.document()
	l := Line{Index: i, Input: input, AllowNonInteger: allow}
	c, err := commit.Domain{AllowNonInteger: allow}.Params(input)
	var de *commit.DomainError
	switch {
	case err == nil:
		l.Digest, l.Size = c.Digest.String(), c.Size
	case errors.As(err, &de):
		l.Refusal, l.Pointer, l.Key = string(de.Kind), de.Pointer, de.Key
	default:
		panic(fmt.Sprintf("text %d: %v is not a *commit.DomainError", i, err))
	}
	return l
}

// Faults: what a text may carry, one at most.
const (
	faultNone = iota
	faultSyntax
	faultUTF8
	faultSurrogate
	faultDuplicate
	faultNFC
	faultRange
	faultFraction
	faultInexact
	faultDepth
	faultNotObject
	faultCount
)

type gen struct {
	r        *rand.Rand
	b        []byte
	allow    bool // the text is judged with non-integers admitted
	fault    int
	injected bool
}

func (g *gen) chance(percent int) bool { return g.r.IntN(100) < percent }

func pick[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// site reports whether the fault f should be injected here: each site of
// its kind takes it with some chance, the last resort (force) always.
func (g *gen) site(f int, force bool) bool {
	if g.fault != f || g.injected || !force && !g.chance(25) {
		return false
	}
	g.injected = true
	return true
}

func (g *gen) document() ([]byte, bool) {
	g.allow = g.chance(20)
	if g.chance(35) {
		g.fault = 1 + g.r.IntN(faultCount-1)
	}
	if g.fault == faultInexact {
		g.allow = true
	}
	if g.site(faultNotObject, true) {
		g.ws()
		switch g.r.IntN(3) {
		case 0:
			g.array(1)
		case 1:
			g.str()
		default:
			g.number()
		}
		g.ws()
		return g.b, g.allow
	}
	if g.fault == faultSyntax && g.chance(10) {
		g.injected = true
		g.b = append(g.b, pick(g, "\ufeff", "//c\n", "/*c*/")...)
	}
	g.ws()
	g.object(1, true)
	g.ws()
	if g.fault == faultSyntax && !g.injected {
		g.injected = true
		g.b = append(g.b, pick(g, "}", ",", "x", "{}", "\x00", "\"")...)
	}
	return g.b, g.allow
}

func (g *gen) ws() {
	if g.chance(70) {
		return
	}
	for range 1 + g.r.IntN(3) {
		g.b = append(g.b, pick[byte](g, ' ', '\t', '\n', '\r'))
	}
}

// names are member names that meet in interesting ways: case, NFC forms,
// UTF-16 order (U+E000, U+FF61 and supplementary characters), pointer
// escapes, the empty name.
var names = []string{"a", "b", "A", "ab", "amount_minor", "to", "é", "\u00c5", "😀", "𐀀", "\ue000", "｡", "€", "~", "/", "a/b", "~1", "", " ", "中文", "ﬀ", "k"}

func (g *gen) object(depth int, top bool) {
	if g.site(faultDepth, false) {
		g.deep(depth)
		return
	}
	g.b = append(g.b, '{')
	n := g.r.IntN(6)
	if top {
		n = 1 + g.r.IntN(6)
	}
	var used []string
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		name := pick(g, names...)
		for tries := 0; contains(used, name) && tries < 20; tries++ {
			name = pick(g, names...)
		}
		if contains(used, name) {
			name = fmt.Sprintf("n%d", i)
		}
		if i > 0 && g.site(faultDuplicate, false) {
			name = used[g.r.IntN(len(used))]
		}
		used = append(used, name)
		g.name(name)
		g.ws()
		if g.fault == faultSyntax && g.site(faultSyntax, false) {
			g.b = append(g.b, pick(g, "", "=", "::")...)
		} else {
			g.b = append(g.b, ':')
		}
		g.ws()
		g.value(depth)
		g.ws()
	}
	if top && !g.injected && g.fault != faultNone && g.fault != faultSyntax {
		// The last resort: a member that carries the fault.
		if n > 0 {
			g.b = append(g.b, ',')
		}
		name := fmt.Sprintf("z%d", n)
		if g.fault == faultDuplicate && n > 0 {
			name = used[0]
		}
		g.name(name)
		g.b = append(g.b, ':')
		g.forced(depth)
	}
	if g.fault == faultSyntax && n > 0 && g.site(faultSyntax, false) {
		g.b = append(g.b, ',')
	}
	g.b = append(g.b, '}')
}

// forced writes a value that carries the document's fault.
func (g *gen) forced(depth int) {
	switch g.fault {
	case faultDepth:
		g.injected = true
		g.deep(depth)
	case faultDuplicate:
		g.injected = true
		g.value(depth)
	case faultUTF8, faultSurrogate, faultNFC:
		g.strForced()
	case faultRange, faultFraction, faultInexact:
		g.numberForced()
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// deep writes containers nested past the default bound of 64.
func (g *gen) deep(depth int) {
	n := commit.DefaultMaxDepth + 1 - depth + g.r.IntN(3)
	for range n {
		g.b = append(g.b, pick(g, "[", `{"d":`)...)
	}
	g.b = append(g.b, '1')
	// Close in reverse: scanning back from the innermost opener.
	var stack []byte
	for i := len(g.b) - 2; len(stack) < n; i-- {
		switch g.b[i] {
		case '[':
			stack = append(stack, ']')
		case '{':
			stack = append(stack, '}')
		}
	}
	g.b = append(g.b, stack...)
}

func (g *gen) value(depth int) {
	if depth >= 6 {
		g.scalar()
		return
	}
	switch g.r.IntN(10) {
	case 0, 1:
		g.object(depth+1, false)
	case 2:
		g.array(depth + 1)
	default:
		g.scalar()
	}
}

func (g *gen) array(depth int) {
	if g.site(faultDepth, false) {
		g.deep(depth)
		return
	}
	g.b = append(g.b, '[')
	n := g.r.IntN(5)
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		g.value(depth)
		g.ws()
	}
	if g.fault == faultSyntax && n > 0 && g.site(faultSyntax, false) {
		g.b = append(g.b, ',')
	}
	g.b = append(g.b, ']')
}

func (g *gen) scalar() {
	switch g.r.IntN(8) {
	case 0, 1, 2:
		g.str()
	case 3, 4, 5:
		g.number()
	case 6:
		g.b = append(g.b, pick(g, "true", "false")...)
	default:
		if g.site(faultSyntax, false) {
			g.b = append(g.b, pick(g, "NaN", "Infinity", "-Infinity", "nul", "True", "undefined", "'x'")...)
			return
		}
		g.b = append(g.b, "null"...)
	}
}

// atoms are pieces of string content, each in NFC alone and after any
// other atom (no atom starts with a combining mark).
var atoms = []string{"a", "Z", "0", " ", "é", "\u00c5", "😀", "𐀀", "\ue000", "｡", "中", "한", "\u0000", "\n", "\t", "\x1f", "\"", "\\", "/", "\u007f", "\u2028", "\ufeff", "€", "ﬀ", "x\u0301"}

func (g *gen) str() {
	if g.fault == faultUTF8 || g.fault == faultSurrogate || g.fault == faultNFC {
		if g.site(g.fault, false) {
			g.strFault()
			return
		}
	}
	g.text(g.content())
}

func (g *gen) strForced() {
	g.injected = true
	g.strFault()
}

func (g *gen) content() string {
	var s strings.Builder
	for range g.r.IntN(7) {
		s.WriteString(pick(g, atoms...))
	}
	return s.String()
}

// strFault writes a string with the document's fault among valid content.
func (g *gen) strFault() {
	g.b = append(g.b, '"')
	g.textBody(g.content())
	switch g.fault {
	case faultUTF8:
		g.b = append(g.b, pick(g, "\xff", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82", "\x80", "\xf4\x90\x80\x80", "\xc3")...)
	case faultSurrogate:
		g.b = append(g.b, pick(g, `\ud800`, `\udc00`, `\ude00\ud83d`, `\ud83d\u0041`, `\uDBFF\uDBFF`, `\ud83dx`)...)
	case faultNFC:
		// Not NFC, or holding a code point whose normalization depends on
		// the Unicode version (unstable_normalization, docs/commitment.md
		// §2.4): U+105D2 U+0307 is NFC only to Unicode 14.0 and 15.0.
		if g.chance(50) {
			g.b = append(g.b, pick(g, "e\u0301", "\u212b", "\u1100\u1161", "\u0041\u030a", "\U000105d2\u0307", "x\u1acf")...)
		} else {
			g.b = append(g.b, pick(g, `e\u0301`, `\u212B`, `\u1100\u1161`, `A\u030A`, `\ud801\uddd2\u0307`, `x\u1ACF`)...)
		}
	}
	g.textBody(g.content())
	g.b = append(g.b, '"')
}

// name writes a member name; it may carry a text fault too.
func (g *gen) name(s string) {
	if (g.fault == faultUTF8 || g.fault == faultSurrogate || g.fault == faultNFC) && g.site(g.fault, false) {
		g.strFault()
		return
	}
	g.text(s)
}

func (g *gen) text(s string) {
	g.b = append(g.b, '"')
	g.textBody(s)
	g.b = append(g.b, '"')
}

// textBody writes s with each character in one of its spellings: raw,
// a short escape, or \u escapes (upper- or lower-case hex, a surrogate
// pair beyond the BMP).
func (g *gen) textBody(s string) {
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			if g.chance(80) {
				g.b = append(g.b, '\\', byte(r))
			} else {
				g.esc(r)
			}
			continue
		case r < 0x20:
			short := map[rune]string{'\n': `\n`, '\t': `\t`, '\r': `\r`, '\b': `\b`, '\f': `\f`}[r]
			if short != "" && g.chance(60) {
				g.b = append(g.b, short...)
			} else {
				g.esc(r)
			}
			continue
		case r == '/' && g.chance(30):
			g.b = append(g.b, `\/`...)
			continue
		}
		if g.chance(20) {
			g.esc(r)
		} else {
			g.b = utf8.AppendRune(g.b, r)
		}
	}
}

func (g *gen) esc(r rune) {
	hex := func(u rune) {
		s := fmt.Sprintf("%04x", u)
		if g.chance(50) {
			s = strings.ToUpper(s)
		}
		g.b = append(g.b, `\u`+s...)
	}
	if r >= 0x10000 {
		r -= 0x10000
		hex(0xd800 + r>>10)
		hex(0xdc00 + r&0x3ff)
		return
	}
	hex(r)
}

const maxSafe = 1<<53 - 1

func (g *gen) number() {
	switch {
	case g.fault == faultRange && g.site(faultRange, false),
		g.fault == faultFraction && g.site(faultFraction, false),
		g.fault == faultInexact && g.site(faultInexact, false):
		g.numberFault()
	case g.fault == faultSyntax && g.site(faultSyntax, false):
		g.b = append(g.b, pick(g, "01", "+1", ".5", "1.", "-", "1e", "0x10", "1e+", "--1", "1_000")...)
	case g.allow && g.chance(30):
		g.b = append(g.b, g.fraction()...)
	default:
		g.integer(g.intValue())
	}
}

func (g *gen) numberForced() {
	g.injected = true
	g.numberFault()
}

func (g *gen) numberFault() {
	switch g.fault {
	case faultRange:
		g.b = append(g.b, pick(g, "9007199254740992", "-9007199254740992", "9007199254740993", "1e400", "-1e400", "9.007199254740992e15", "1e16", "18446744073709551616", "1e99999999999999999999")...)
	case faultFraction:
		g.b = append(g.b, g.fraction()...)
	case faultInexact:
		g.b = append(g.b, pick(g, "0.10000000000000000001", "1e-400", "333333333.33333329", "0.1000000000000000055511151231257827", "2.00000000000000000001", "123456789.123456789")...)
	}
}

func (g *gen) intValue() int64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return maxSafe - g.r.Int64N(3)
	case 2:
		return -(maxSafe - g.r.Int64N(3))
	case 3:
		return g.r.Int64N(2000001) - 1000000
	default:
		return g.r.Int64N(1000)
	}
}

// integer writes v in one of its spellings: plain, with a zero fraction,
// or with an exponent ("1500", "1500.00", "15e2", "1.5E+3", "15000e-1").
func (g *gen) integer(v int64) {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	sign := ""
	if neg || v == 0 && g.chance(20) {
		sign = "-" // -0 is zero
	}
	switch g.r.IntN(6) {
	case 0, 1:
		g.b = append(g.b, sign+digits...)
	case 2:
		g.b = append(g.b, sign+digits+"."+strings.Repeat("0", 1+g.r.IntN(3))...)
	case 3: // m e k with m's trailing zeros moved to the exponent
		m := strings.TrimRight(digits, "0")
		if m == "" {
			m = "0"
		}
		k := len(digits) - len(m)
		if digits == "0" {
			k = g.r.IntN(5)
		}
		g.b = append(g.b, sign+m+pick(g, "e", "E", "e+", "E+")+strconv.Itoa(k)...)
	case 4: // one digit before the point
		exp := len(digits) - 1
		frac := strings.TrimRight(digits[1:], "0")
		mant := digits[:1]
		if frac != "" {
			mant += "." + frac
		}
		g.b = append(g.b, sign+mant+"e"+strconv.Itoa(exp)...)
	default: // extra zeros, a negative exponent
		z := 1 + g.r.IntN(3)
		g.b = append(g.b, sign+digits+strings.Repeat("0", z)+"e-"+strconv.Itoa(z)...)
	}
}

// fraction is a non-integer with at most 15 significant digits, so that
// its RFC 8785 form denotes the same decimal value.
func (g *gen) fraction() string {
	digits := strconv.FormatInt(1+g.r.Int64N(999999), 10)
	if digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1] + "7"
	}
	exp := -len(digits) - g.r.IntN(4) + g.r.IntN(len(digits)) // never an integer
	if exp >= 0 {
		exp = -1
	}
	sign := pick(g, "", "-")
	switch g.r.IntN(3) {
	case 0:
		return sign + digits + "e" + strconv.Itoa(exp)
	case 1:
		return sign + digits + "E" + strconv.Itoa(exp)
	default:
		// Positional: digits with the point exp places from the right.
		p := len(digits) + exp
		if p <= 0 {
			return sign + "0." + strings.Repeat("0", -p) + digits
		}
		return sign + digits[:p] + "." + digits[p:]
	}
}
