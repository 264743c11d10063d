// Package termtext writes untrusted text for a terminal. What the
// commands print comes largely from their input or from a server: entry
// fields, checkpoint origins, declaration text, file names, and error
// messages that quote any of these. None of it reaches a terminal raw, so
// that an input cannot rewrite the reader's screen with escape sequences
// or reorder it with bidirectional controls. Human output goes through
// PrintLine, which escapes every character that is not printable; values
// are shown with Quote. JSON output stays exact JSON, with the same
// characters written as JSON escapes (WriteJSON).
package termtext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape returns s with each character strconv.IsPrint refuses (controls,
// format characters such as U+202E, separators other than ASCII space,
// unassigned code points) written as its Go escape (\x1b, \n, \u202e), and
// each byte of invalid UTF-8 as \xNN. Printable text comes back unchanged.
func Escape(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func isPrintable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// Quote returns a value from the input as it is if it reads unambiguously
// (non-empty, printable, without space, '"' or '\'), and otherwise in Go
// double-quoted form (strconv.Quote), so that ordinary identifiers, origins
// and file names stay readable and nothing else can pass for them.
func Quote(s string) string {
	if s != "" && isPrintable(s) && !strings.ContainsAny(s, " \"\\") {
		return s
	}
	return strconv.Quote(s)
}

// PrintLine writes one line of human output: the formatted text, escaped,
// and a newline.
func PrintLine(w io.Writer, format string, args ...any) {
	io.WriteString(w, Escape(fmt.Sprintf(format, args...))+"\n")
}

// JSONEscape rewrites JSON text from encoding/json so that it holds no
// character strconv.IsPrint refuses: the encoder already escapes U+0000 to
// U+001F and writes valid UTF-8; jsonEscape writes DEL, the C1 controls,
// format characters and the like as \uXXXX (a surrogate pair above
// U+FFFF). They occur only inside strings, whose values do not change. A
// final newline is kept.
func JSONEscape(b []byte) []byte {
	if isPrintable(string(bytes.TrimSuffix(b, []byte("\n")))) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || strconv.IsPrint(r) || r == utf8.RuneError && size == 1:
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// WriteJSON writes v as one line of JSON with every character
// strconv.IsPrint refuses written as a JSON escape (JSONEscape), so that
// the text is safe on a terminal and decodes to exactly the same values.
// v must encode: the commands pass maps, structs and verified entries.
func WriteJSON(w io.Writer, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	w.Write(JSONEscape(b.Bytes()))
}

// Count is n and the noun for it: "1 entry", "0 entries", "2 entries".
func Count[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
