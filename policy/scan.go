package policy

import (
	"strconv"
	"unicode/utf8"
)

// A token of Cedar policy text, as far as this package needs to place an
// attribute inside a policy: cedar-go's AST carries no positions below
// the policy, so a refused attribute is found again in the text.
type token struct {
	kind      tokenKind
	text      string // as written; a string keeps its quotes
	offset    int    // byte offset in the file
	line, col int    // 1-based; col counts code points, as cedar-go does
}

type tokenKind int

const (
	tokIdent tokenKind = iota
	tokString
	tokInt
	tokPunct
)

// scan splits src into tokens, dropping white space and comments. It is
// lenient: it is only run over text cedar-go has parsed, and an
// unterminated string ends the scan.
func scan(src []byte) []token {
	var toks []token
	line, col := 1, 1
	i := 0
	advance := func(to int) { // moves i to to, counting lines and columns
		for i < to {
			r, n := utf8.DecodeRune(src[i:])
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i += n
		}
	}
	for i < len(src) {
		c := src[i]
		start := token{offset: i, line: line, col: col}
		end := i + 1
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			advance(end)
			continue
		case c == '/' && end < len(src) && src[end] == '/':
			for end < len(src) && src[end] != '\n' {
				end++
			}
			advance(end)
			continue
		case c == '"':
			for end < len(src) && src[end] != '"' {
				if src[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(src) {
				return toks
			}
			end++
			start.kind = tokString
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			for end < len(src) && (src[end] == '_' || 'a' <= src[end] && src[end] <= 'z' || 'A' <= src[end] && src[end] <= 'Z' || '0' <= src[end] && src[end] <= '9') {
				end++
			}
			start.kind = tokIdent
		case '0' <= c && c <= '9':
			for end < len(src) && '0' <= src[end] && src[end] <= '9' {
				end++
			}
			start.kind = tokInt
		default:
			if end < len(src) {
				switch string(src[i : end+1]) {
				case "==", "!=", "<=", ">=", "&&", "||", "::":
					end++
				}
			}
			if c >= utf8.RuneSelf {
				_, n := utf8.DecodeRune(src[i:])
				end = i + n
			}
			start.kind = tokPunct
		}
		start.text = string(src[i:end])
		toks = append(toks, start)
		advance(end)
	}
	return toks
}

// An attrToken is an attribute as the text names it: `.name` (not a
// method call), `["name"]`, `has name`, `has "name"`, or a further
// `.name` of `has a.b`, with the path of its receiver when the text
// spells one (a variable followed by attribute names), nil otherwise.
type attrToken struct {
	token
	name     string
	receiver []string
}

// attrTokens returns the attribute tokens of toks, in source order.
func attrTokens(toks []token) []attrToken {
	var out []attrToken
	for i, t := range toks {
		if i == 0 {
			continue
		}
		prev := toks[i-1].text
		var name string
		var ok bool
		switch {
		case t.kind == tokIdent && prev == "." && (i+1 >= len(toks) || toks[i+1].text != "("):
			name, ok = t.text, true
		case t.kind == tokIdent && prev == "has":
			name, ok = t.text, true
		case t.kind == tokString && prev == "has",
			t.kind == tokString && prev == "[" && i+1 < len(toks) && toks[i+1].text == "]":
			s, err := strconv.Unquote(t.text)
			name, ok = s, err == nil
		}
		if !ok {
			continue
		}
		// toks[i-2] is the receiver's last token: before ".", "[" or "has".
		out = append(out, attrToken{token: t, name: name, receiver: pathEndingAt(toks, i-2, 0)})
	}
	return out
}

// pathEndingAt returns the attribute path of the expression whose last
// token is toks[i] when it is a variable followed by attributes
// (`context.payee`, `context has payee` for the b of `has payee.b`),
// nil otherwise.
func pathEndingAt(toks []token, i, depth int) []string {
	if i < 0 || depth > 64 {
		return nil
	}
	t := toks[i]
	var before []string
	var name string
	switch {
	case t.kind == tokIdent && i > 0 && (toks[i-1].text == "." || toks[i-1].text == "has"):
		before, name = pathEndingAt(toks, i-2, depth+1), t.text
	case t.kind == tokIdent && (i == 0 || toks[i-1].text != "::"):
		switch t.text {
		case "principal", "action", "resource", "context":
			return []string{t.text}
		}
		return nil
	case t.text == "]" && i >= 2 && toks[i-1].kind == tokString && toks[i-2].text == "[":
		s, err := strconv.Unquote(toks[i-1].text)
		if err != nil {
			return nil
		}
		before, name = pathEndingAt(toks, i-3, depth+1), s
	default:
		return nil
	}
	if before == nil {
		return nil
	}
	return append(before, name)
}
