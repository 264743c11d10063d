package commit

import (
	"unicode"
	"unicode/utf8"
)

// UnicodeVersionFrozen is the Unicode version up to which the list of
// unstableNormalization is complete. A newer Unicode version may assign
// more code points whose normalization older implementations cannot
// know; the list must be extended before any implementation runs on it.
const UnicodeVersionFrozen = "17.0.0"

// unstableNormalization is the frozen list of docs/commitment.md §2.4: the
// code points assigned after Unicode 14.0 and up to 17.0 whose
// normalization is not inert (a combining class other than 0, a canonical
// decomposition, or a part in another code point's). An implementation
// with older Unicode tables takes them for unassigned, so NFC would judge
// a string holding one differently in different implementations.
// testdata/conformance/unicode/gen.mjs generates the list
// (unstable.json); TestUnstableNormalizationList holds this table to it.
var unstableNormalization = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x0897, 0x0897, 1},
		{0x1acf, 0x1add, 1},
		{0x1ae0, 0x1aeb, 1},
	},
	R32: []unicode.Range32{
		{0x105c9, 0x105c9, 1},
		{0x105d2, 0x105d2, 1},
		{0x105da, 0x105da, 1},
		{0x105e4, 0x105e4, 1},
		{0x10d69, 0x10d6d, 1},
		{0x10efa, 0x10efb, 1},
		{0x10efd, 0x10eff, 1},
		{0x11382, 0x11385, 1},
		{0x1138b, 0x1138b, 1},
		{0x1138e, 0x1138e, 1},
		{0x11390, 0x11391, 1},
		{0x113b8, 0x113b8, 1},
		{0x113bb, 0x113bb, 1},
		{0x113c2, 0x113c2, 1},
		{0x113c5, 0x113c5, 1},
		{0x113c7, 0x113c9, 1},
		{0x113ce, 0x113d0, 1},
		{0x11f41, 0x11f42, 1},
		{0x1611e, 0x16129, 1},
		{0x1612f, 0x1612f, 1},
		{0x16d63, 0x16d63, 1},
		{0x16d67, 0x16d6a, 1},
		{0x1e08f, 0x1e08f, 1},
		{0x1e4ec, 0x1e4ef, 1},
		{0x1e5ee, 0x1e5ef, 1},
		{0x1e6e3, 0x1e6e3, 1},
		{0x1e6e6, 0x1e6e6, 1},
		{0x1e6ee, 0x1e6ef, 1},
		{0x1e6f5, 0x1e6f5, 1},
	},
}

// firstUnstable is the smallest code point of unstableNormalization. Its
// UTF-8 form, like that of every code point above it, starts with a byte
// of at least 0xE0, so shorter sequences need not be decoded; nor need
// those starting with E2–EF (U+2000–U+FFFF) or F1–F4 (U+40000 and above),
// which hold no listed code point. The text is well-formed UTF-8, so a
// lead byte says the length of its sequence.
const firstUnstable = 0x0897

// hasUnstableNormalization reports whether the well-formed UTF-8 text s
// holds a code point of unstableNormalization.
func hasUnstableNormalization[T ~string | ~[]byte](s T) bool {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c < 0xe0: // ASCII, a continuation byte, or a 2-byte sequence: below U+0800
			i++
		case c > 0xe1 && c < 0xf0: // U+2000–U+FFFF: none listed
			i += 3
		case c > 0xf0: // U+40000 and above: none listed
			i += 4
		default:
			r, n := decodeRune(s[i:])
			if r >= firstUnstable && unicode.Is(unstableNormalization, r) {
				return true
			}
			i += n
		}
	}
	return false
}

// decodeRune is utf8.DecodeRune or DecodeRuneInString, as s is.
func decodeRune[T ~string | ~[]byte](s T) (rune, int) {
	if b, ok := any(s).([]byte); ok {
		return utf8.DecodeRune(b)
	}
	return utf8.DecodeRuneInString(string(s))
}

// NormalizationStable reports whether s holds no code point whose
// normalization implementations may judge differently (docs/commitment.md
// §2.4): for such text, NFC means the same to every implementation that
// has Unicode 14.0 or later. Text that is not stable is refused with
// ErrUnstableNormalization.
func NormalizationStable(s string) bool { return !hasUnstableNormalization(s) }
