package preview

import (
	"encoding/base64"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Marker replaces every redacted value, and every redacted part of a string.
const Marker = "[REDACTED]"

// sensitiveSubstrings redact a member whose folded name (lower case, with
// '_', '-', '.' and spaces removed) contains one of them anywhere.
var sensitiveSubstrings = []string{
	"password", "passwd", "passphrase", "passcode",
	"secret",
	"apikey", "accesskey", "privatekey", "privkey", "signingkey", "encryptionkey",
	"credential",
	"authorization",
	"cookie",
	"bearer",
	"sessionid", "sessionkey",
	"csrf", "xsrf",
}

// sensitiveWords redact a member when one of the words of its name (split
// at '_', '-', '.', spaces, digits and lower-to-upper case changes) equals
// one of them: "access_token" and "authToken" go, "max_tokens", "author"
// and "oauth" stay.
var sensitiveWords = []string{"token", "auth", "session", "otp", "ssn", "pwd", "pass", "jwt", "cvv", "cvc"}

// sensitiveNames redact a member only when its whole folded name equals one
// of them: "pin" and "PIN" go, "pinned" and "spin" stay.
var sensitiveNames = []string{"pin", "pincode"}

// foldName lower-cases a member name and removes '_', '-', '.' and spaces.
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch r {
		case '_', '-', '.', ' ':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// nameWords splits a member name into lower-case words.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// sensitiveName reports whether a member's value is redacted by its name.
func sensitiveName(name string) bool {
	folded := foldName(name)
	for _, s := range sensitiveSubstrings {
		if strings.Contains(folded, s) {
			return true
		}
	}
	for _, s := range sensitiveNames {
		if folded == s {
			return true
		}
	}
	for _, w := range nameWords(name) {
		for _, s := range sensitiveWords {
			if w == s {
				return true
			}
		}
	}
	return false
}

// A shapeRule finds credential-shaped text in a string: the submatch group
// of each match of re is replaced, if check (when set) accepts it.
type shapeRule struct {
	hint  func(string) bool // a cheap test every match passes
	re    *regexp.Regexp
	group int // submatch that is replaced (0: the whole match)
	check func(string) bool
}

var shapeRules = []shapeRule{
	// PEM private key blocks, to their END line or, lacking one, to the end
	// of the string.
	{hint: contains("PRIVATE KEY-----"), re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)`)},
	// The password of a URL's userinfo: scheme://user:PASSWORD@host.
	{hint: contains("://"), re: regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s:@]*:([^/?#\s@]+)@`), group: 1},
	// HTTP credentials: "Bearer " and 16 or more token68 characters.
	{hint: containsFold("bearer"), re: regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)`), group: 1},
	// HTTP credentials: "Basic " and base64 that decodes to text with ':'.
	{hint: containsFold("basic"), re: regexp.MustCompile(`(?i)\bbasic\s+([A-Za-z0-9+/]{4,}={0,2})`), group: 1, check: isBasicCredential},
	// JWTs: header and payload both base64url JSON objects ("eyJ").
	{hint: contains(".eyJ"), re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)},
	// Well-known API key prefixes.
	{hint: contains("AKIA", "ASIA", "_live_", "_test_", "gh", "xox", "sk-", "AIza", "glpat-", "npm_"), re: regexp.MustCompile(`\b(?:` +
		`(?:AKIA|ASIA)[0-9A-Z]{16}` + // AWS access key id
		`|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}` + // Stripe
		`|gh[pousr]_[A-Za-z0-9]{36,}` + // GitHub
		`|github_pat_[A-Za-z0-9_]{22,}` + // GitHub fine-grained
		`|xox[abposr]-[A-Za-z0-9-]{10,}` + // Slack
		`|sk-[A-Za-z0-9_-]{20,}` + // OpenAI, Anthropic
		`|AIza[0-9A-Za-z_-]{35}` + // Google
		`|glpat-[A-Za-z0-9_-]{20,}` + // GitLab
		`|npm_[A-Za-z0-9]{36}` + // npm
		`)`)},
}

func contains(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
}

// containsFold reports whether s holds an ASCII word, in any case.
func containsFold(word string) func(string) bool {
	return func(s string) bool {
		for i := 0; i+len(word) <= len(s); i++ {
			if c := s[i] | 0x20; c == word[0] && strings.EqualFold(s[i:i+len(word)], word) {
				return true
			}
		}
		return false
	}
}

// isBasicCredential reports whether s is standard base64 of text holding a
// ':', as "Basic" credentials (user:password) are.
func isBasicCredential(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	return err == nil && strings.IndexByte(string(b), ':') > 0
}

// minTokenRun is the length from which a run of token characters holding
// an upper-case letter, a lower-case letter and a digit is redacted.
const minTokenRun = 32

func isTokenChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
		c == '+' || c == '=' || c == '_' || c == '-'
}

// redactTokens replaces each maximal run of at least minTokenRun token
// characters ([A-Za-z0-9+=_-]) that holds an upper-case letter, a
// lower-case letter and a digit.
func redactTokens(s string) (string, int) {
	var b strings.Builder
	count, last := 0, 0
	for i := 0; i < len(s); {
		if !isTokenChar(s[i]) {
			i++
			continue
		}
		j := i
		var upper, lower, digit bool
		for j < len(s) && isTokenChar(s[j]) {
			c := s[j]
			upper = upper || c >= 'A' && c <= 'Z'
			lower = lower || c >= 'a' && c <= 'z'
			digit = digit || c >= '0' && c <= '9'
			j++
		}
		if j-i >= minTokenRun && upper && lower && digit {
			b.WriteString(s[last:i])
			b.WriteString(Marker)
			last = j
			count++
		}
		i = j
	}
	if count == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), count
}

// maxRounds bounds how often redactString applies the rules: one
// replacement can create a match for another (a marker gives "Bearer" the
// word boundary it lacked), so the rules run until nothing changes.
const maxRounds = 8

// redactString applies the shape rules, in order, until the string no
// longer changes, and returns it with each matched part replaced by Marker,
// and the number of replacements. If the rules still change it after
// maxRounds rounds, or a replacement left the string outside NFC, the
// whole string becomes Marker.
func redactString(s string) (string, int) {
	total := 0
	for range maxRounds {
		var n int
		s, n = redactOnce(s)
		if n == 0 {
			if total > 0 && (!utf8.ValidString(s) || !norm.NFC.IsNormalString(s)) {
				return Marker, total
			}
			return s, total
		}
		total += n
	}
	return Marker, total
}

// redactOnce applies each shape rule once, in order. A match that is
// already exactly Marker is left as it is.
func redactOnce(s string) (string, int) {
	total := 0
	for _, rule := range shapeRules {
		if !rule.hint(s) {
			continue
		}
		matches := rule.re.FindAllStringSubmatchIndex(s, -1)
		var b strings.Builder
		last, n := 0, 0
		for _, m := range matches {
			lo, hi := m[2*rule.group], m[2*rule.group+1]
			if lo < 0 || s[lo:hi] == Marker || rule.check != nil && !rule.check(s[lo:hi]) {
				continue
			}
			b.WriteString(s[last:lo])
			b.WriteString(Marker)
			last = hi
			n++
		}
		if n > 0 {
			b.WriteString(s[last:])
			s = b.String()
			total += n
		}
	}
	s, n := redactTokens(s)
	return s, total + n
}

// secretShaped reports whether any shape rule matches s.
func secretShaped(s string) bool {
	_, n := redactString(s)
	return n > 0
}
