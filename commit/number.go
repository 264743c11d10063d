package commit

import (
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// MaxSafeInteger is 2^53−1, the largest integer n such that n and n+1 are
// both exactly representable as IEEE-754 doubles. Integer values beyond
// ±MaxSafeInteger are refused: a JSON parser that reads numbers as doubles
// (JavaScript's among them) would silently change them.
const MaxSafeInteger = 1<<53 - 1

// decimal is the exact value of a JSON number, sign × digits × 10^exp, with
// digits free of leading and trailing zeros ("" for zero).
type decimal struct {
	negative bool
	digits   string
	exp      int64
	huge     bool // the exponent's magnitude exceeds maxExponent
}

// maxExponent bounds the exponents decimal represents exactly: far beyond
// any double (about 10^±324) and far below int64 overflow.
const maxExponent = 1_000_000_000

// parseDecimal reads the exact value of a number token that already matched
// the RFC 8259 grammar. It does no floating-point arithmetic, so it loses
// nothing: "100", "100.0", "1e2" and "1.00e+2" all give digits "1", exp 2.
func parseDecimal(tok string) decimal {
	var d decimal
	if tok[0] == '-' {
		d.negative = true
		tok = tok[1:]
	}
	mant, expText := tok, ""
	if i := strings.IndexAny(tok, "eE"); i >= 0 {
		mant, expText = tok[:i], tok[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return decimal{} // zero, of either sign
	}

	expNegative := false
	if expText != "" && (expText[0] == '+' || expText[0] == '-') {
		expNegative = expText[0] == '-'
		expText = expText[1:]
	}
	expText = strings.TrimLeft(expText, "0")
	var exp int64
	if len(expText) > 10 {
		d.huge = true
	} else if expText != "" {
		exp, _ = strconv.ParseInt(expText, 10, 64)
	}
	if expNegative {
		exp = -exp
	}
	exp += int64(len(digits)-len(trimmed)) - int64(len(frac))
	d.digits, d.exp = trimmed, exp
	switch {
	case d.huge && expNegative, exp < -maxExponent:
		// Only the sign of a huge exponent matters to the callers. The
		// input bound (maxInputBytes) keeps the fraction's length from
		// turning a huge exponent's sign around.
		d.huge, d.exp = true, -1
	case d.huge, exp > maxExponent:
		d.huge, d.exp = true, 1
	}
	return d
}

func (d decimal) isInteger() bool { return d.exp >= 0 }

// integer returns the value of an integer decimal if it lies within
// ±MaxSafeInteger.
func (d decimal) integer() (int64, bool) {
	if d.digits == "" {
		return 0, true
	}
	if d.huge || !d.isInteger() || int64(len(d.digits))+d.exp > 16 {
		return 0, false
	}
	v, err := strconv.ParseInt(d.digits+strings.Repeat("0", int(d.exp)), 10, 64)
	if err != nil || v > MaxSafeInteger {
		return 0, false
	}
	if d.negative {
		v = -v
	}
	return v, true
}

// numberNode applies the domain's number rules to a number token.
//
// An integer value (whatever its spelling) must lie within ±MaxSafeInteger
// and becomes a kindInteger. A non-integer value is refused unless admitted;
// once admitted it takes its RFC 8785 form (the ECMAScript rendering of the
// nearest double), and is refused if that form denotes a different decimal
// value than the one written, so no admitted number is silently rounded.
func numberNode(tok string, allowNonInteger, rfc8785 bool) (node, Kind) {
	if rfc8785 {
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return node{}, ErrIntegerRange
		}
		text, err := jcs.NumberToJSON(f)
		if err != nil {
			return node{}, ErrNonFinite
		}
		return node{kind: kindNumber, text: []byte(text)}, ""
	}
	d := parseDecimal(tok)
	if d.isInteger() {
		v, ok := d.integer()
		if !ok {
			return node{}, ErrIntegerRange
		}
		return node{kind: kindInteger, num: v}, ""
	}
	if !allowNonInteger {
		return node{}, ErrNonInteger
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return node{}, ErrInexactNumber
	}
	text, err := jcs.NumberToJSON(f)
	if err != nil || parseDecimal(text) != d {
		return node{}, ErrInexactNumber
	}
	return node{kind: kindNumber, text: []byte(text)}, ""
}
