// Package pgurl shows a PostgreSQL connection string without its
// password, for messages and logs. It is apart from storage/postgres so
// that the config's checks (package config) can redact the store's URL
// without importing the store.
package pgurl

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact returns connURL with any password replaced by xxxxx: in a
// postgres:// or postgresql:// URL, its user information's and its
// password query parameter's; of any other text with "://" (a URL it
// cannot parse, or of another scheme), only the scheme; in libpq's
// key=value form, password's value, quoted or not.
func Redact(connURL string) string {
	if u, err := url.Parse(connURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if strings.Contains(connURL, "://") {
		// Not a URL we can parse: show only its scheme.
		return connURL[:strings.Index(connURL, "://")] + "://(unparsable URL)"
	}
	// key=value form.
	connURL = quotedPassword.ReplaceAllLiteralString(connURL, "password=xxxxx")
	return barePassword.ReplaceAllLiteralString(connURL, "password=xxxxx")
}

var (
	quotedPassword = regexp.MustCompile(`password\s*=\s*'(?:[^'\\]|\\.)*'`)
	barePassword   = regexp.MustCompile(`password\s*=\s*[^'\s][^\s]*`)
)
