package main

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

// What ledgerctl prints comes largely from the server and from files:
// entry fields, origins, error messages, file names. None of it reaches a
// terminal raw, so that an answer cannot rewrite the operator's screen
// with escape sequences or reorder it with bidirectional controls (the
// same rules as ledger-verify's). Human output goes through printLine
// (and errorf, hintf), which escapes every character that is not
// printable; values are shown with quote. --json output stays exact JSON,
// with the same characters written as JSON escapes (writeJSON).

// escape returns s with each character strconv.IsPrint refuses written as
// its Go escape (\x1b, \n, \u202e), and each byte of invalid UTF-8 as
// \xNN. Printable text comes back unchanged.
func escape(s string) string {
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

// quote returns a value as it is if it reads unambiguously (non-empty,
// printable, without space, '"' or '\'), and otherwise in Go double-quoted
// form, so that identifiers and file names stay readable and nothing else
// can pass for them.
func quote(s string) string {
	if s != "" && isPrintable(s) && !strings.ContainsAny(s, " \"\\") {
		return s
	}
	return strconv.Quote(s)
}

// printLine writes one line of human output: the formatted text, escaped,
// and a newline.
func printLine(w io.Writer, format string, args ...any) {
	io.WriteString(w, escape(fmt.Sprintf(format, args...))+"\n")
}

// writeJSON writes v as one line of JSON with every character
// strconv.IsPrint refuses written as a JSON escape (jsonEscape).
func writeJSON(w io.Writer, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a json.RawMessage that is not JSON could fail, and the
		// client verified every entry it returns.
		panic(err)
	}
	w.Write(jsonEscape(b.Bytes()))
}

// jsonEscape rewrites JSON text from encoding/json so that it holds no
// character strconv.IsPrint refuses: DEL, the C1 controls, format
// characters and the like become \uXXXX (a surrogate pair above U+FFFF).
// They occur only inside strings, whose values do not change. A final
// newline is kept.
func jsonEscape(b []byte) []byte {
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
