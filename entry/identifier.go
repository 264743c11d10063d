package entry

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// refused are the code points an identifier may not hold (docs/entry.md
// §1.1): the control characters (general category Cc, fixed by Unicode's
// stability policy), the format characters (Cf) of Unicode 15.0 — among
// them the bidirectional overrides, embeddings, isolates and marks, and the
// zero-width characters — and the line and paragraph separators U+2028 and
// U+2029. The list is written out, not taken from package unicode, so that
// the set of valid entries does not change when Go updates its Unicode
// tables; TestRefusedTable compares it with them.
var refused = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x0000, Hi: 0x001f, Stride: 1}, // C0 controls
		{Lo: 0x007f, Hi: 0x009f, Stride: 1}, // DEL and C1 controls (U+0085 NEL, U+009B CSI)
		{Lo: 0x00ad, Hi: 0x00ad, Stride: 1}, // soft hyphen
		{Lo: 0x0600, Hi: 0x0605, Stride: 1}, // Arabic number signs
		{Lo: 0x061c, Hi: 0x061c, Stride: 1}, // Arabic letter mark
		{Lo: 0x06dd, Hi: 0x06dd, Stride: 1},
		{Lo: 0x070f, Hi: 0x070f, Stride: 1},
		{Lo: 0x0890, Hi: 0x0891, Stride: 1},
		{Lo: 0x08e2, Hi: 0x08e2, Stride: 1},
		{Lo: 0x180e, Hi: 0x180e, Stride: 1}, // Mongolian vowel separator
		{Lo: 0x200b, Hi: 0x200f, Stride: 1}, // zero width space, non-joiner, joiner; LRM, RLM
		{Lo: 0x2028, Hi: 0x202e, Stride: 1}, // line and paragraph separators (Zl, Zp); bidi embeddings and overrides
		{Lo: 0x2060, Hi: 0x2064, Stride: 1}, // word joiner, invisible operators
		{Lo: 0x2066, Hi: 0x206f, Stride: 1}, // bidi isolates; deprecated format characters
		{Lo: 0xfeff, Hi: 0xfeff, Stride: 1}, // zero width no-break space (byte order mark)
		{Lo: 0xfff9, Hi: 0xfffb, Stride: 1}, // interlinear annotation
	},
	R32: []unicode.Range32{
		{Lo: 0x110bd, Hi: 0x110bd, Stride: 1},
		{Lo: 0x110cd, Hi: 0x110cd, Stride: 1},
		{Lo: 0x13430, Hi: 0x1343f, Stride: 1}, // Egyptian hieroglyph format controls
		{Lo: 0x1bca0, Hi: 0x1bca3, Stride: 1}, // shorthand format controls
		{Lo: 0x1d173, Hi: 0x1d17a, Stride: 1}, // musical symbol format controls
		{Lo: 0xe0001, Hi: 0xe0001, Stride: 1}, // language tag
		{Lo: 0xe0020, Hi: 0xe007f, Stride: 1}, // tag characters
	},
	LatinOffset: 3,
}

// refusedRune returns the first code point of s that an identifier may not
// hold, and its byte offset. s is valid UTF-8 (the caller has checked).
func refusedRune(s string) (r rune, at int, found bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return rune(c), i, true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.Is(refused, r) {
			return r, i, true
		}
		i += size
	}
	return 0, 0, false
}

// CheckIdentifier returns an error wrapping ErrIdentifierChar if s, valid
// UTF-8, holds a code point no identifier may hold, naming it and its byte
// offset, never s. Configurations check the names that become identifiers
// (a key's name, a mediator's) with it before any entry is built.
func CheckIdentifier(s string) error {
	if r, at, found := refusedRune(s); found {
		return fmt.Errorf("%w: %U at byte %d", ErrIdentifierChar, r, at)
	}
	return nil
}
