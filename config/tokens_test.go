package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// The config refuses half a previous-token pair, a malformed hash or
// time, and a previous hash that is the mediator's own or another
// mediator's; a pair whose time has passed is accepted (and inert).
func TestPreviousTokenConfig(t *testing.T) {
	cur, prev, other := strings.Repeat("b", 64), strings.Repeat("c", 64), strings.Repeat("d", 64)
	const exp = "2026-12-01T15:00:00Z"
	mediators := func(ms ...string) string { return `"mediators": [` + strings.Join(ms, ", ") + `]` }
	m := func(name, hash, previous, expires string) string {
		s := fmt.Sprintf(`{"name": %q, "token_sha256": %q`, name, hash)
		if previous != "-" {
			s += fmt.Sprintf(`, "previous_token_sha256": %q`, previous)
		}
		if expires != "-" {
			s += fmt.Sprintf(`, "previous_token_expires": %q`, expires)
		}
		return s + "}"
	}
	refused := map[string]string{
		mediators(m("m", cur, prev, "-")):                                                               "mediators[0] (m): previous_token_sha256 needs previous_token_expires",
		mediators(m("m", cur, "-", exp)):                                                                "mediators[0] (m): previous_token_expires needs previous_token_sha256",
		mediators(m("m", cur, "", exp)):                                                                 "mediators[0] (m): previous_token_expires needs previous_token_sha256",
		mediators(m("m", cur, prev[:63], exp)):                                                          "mediators[0] (m): previous_token_sha256 is not 64 lower-case hex digits",
		mediators(m("m", cur, strings.ToUpper(prev), exp)):                                              "mediators[0] (m): previous_token_sha256 is not 64 lower-case hex digits",
		mediators(m("m", cur, prev, "2026-12-01 15:00:00")):                                             `mediators[0] (m): previous_token_expires "2026-12-01 15:00:00" is not an RFC 3339 time in UTC`,
		mediators(m("m", cur, prev, "2026-12-01T16:00:00+01:00")):                                       `mediators[0] (m): previous_token_expires "2026-12-01T16:00:00+01:00" is not an RFC 3339 time in UTC`,
		mediators(m("m", cur, prev, "1h")):                                                              `previous_token_expires "1h" is not an RFC 3339 time`,
		mediators(m("m", cur, cur, exp)):                                                                "mediators[0] (m): previous_token_sha256 is its token_sha256",
		mediators(m("m", cur, "-", "-"), m("n", other, cur, exp)):                                       "mediators[1] (n): previous_token_sha256 is also mediators[0]'s",
		mediators(m("m", cur, prev, exp), m("n", other, prev, exp)):                                     "mediators[1] (n): previous_token_sha256 is also mediators[0]'s",
		mediators(m("m", cur, prev, exp), m("n", prev, "-", "-")):                                       "mediators[1] (n): token_sha256 is also mediators[0]'s",
		mediators(m("m", cur, "-", "-"), m("n", other, strings.Repeat("e", 64), "2026-12-01T15:00:00")): "mediators[1] (n): previous_token_expires",
	}
	for change, want := range refused {
		if _, err := configWith(t, change); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", change, err, want)
		}
	}
	for _, change := range []string{
		mediators(m("m", cur, prev, exp), m("n", other, "-", "-")),
		mediators(m("m", cur, prev, "2020-01-01T00:00:00Z")), // expired
		mediators(m("m", cur, prev, "2026-12-01T15:00:00.5Z")),
		mediators(m("m", cur, "", "")),
	} {
		if _, err := configWith(t, change); err != nil {
			t.Errorf("%s: %v", change, err)
		}
	}
}

// A previous token authenticates as its mediator before its expiry, by
// the clock given, and is unknown from the expiry on; the current token
// authenticates throughout.
func TestPreviousTokenExpiry(t *testing.T) {
	const oldTok, newTok, otherTok = "old-token-example", "new-token-example", "other-token-example"
	expires := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	cfg := &Config{Mediators: []Mediator{
		{Name: "other", TokenSHA256: tokenHash(otherTok)},
		{Name: "billing", TokenSHA256: tokenHash(newTok), PreviousTokenSHA256: tokenHash(oldTok), PreviousTokenExpires: expires.Format(time.RFC3339)},
	}}
	ts := cfg.MediatorTokens()
	for _, c := range []struct {
		token    string
		at       time.Time
		name     string
		previous bool
	}{
		{oldTok, expires.Add(-time.Hour), "billing", true},
		{oldTok, expires.Add(-time.Nanosecond), "billing", true},
		{oldTok, expires, "", false},
		{oldTok, expires.Add(time.Second), "", false},
		{newTok, expires.Add(-time.Hour), "billing", false},
		{newTok, expires.Add(time.Hour), "billing", false},
		{otherTok, expires, "other", false},
		{"unknown-token-example", expires.Add(-time.Hour), "", false},
	} {
		if name, previous := ts.Authenticate(c.token, c.at); name != c.name || previous != c.previous {
			t.Errorf("%s at %v: %q, previous %v; want %q, %v", c.token, c.at, name, previous, c.name, c.previous)
		}
	}
}
