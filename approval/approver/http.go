package approver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// The session cookie's names: SecureCookieName under TLS, whose __Host-
// prefix makes a browser refuse it unless it is Secure, has Path=/ and no
// Domain (RFC 6265bis §4.1.3.2), so that no other host or plain-HTTP page
// can set it; CookieName without TLS, where a browser refuses the prefix.
const (
	SecureCookieName = "__Host-ledger-session"
	CookieName       = "ledger-session"
)

func cookieName(secure bool) string {
	if secure {
		return SecureCookieName
	}
	return CookieName
}

// SessionCookie returns the cookie that carries a session token: named
// SecureCookieName and Secure when secure (ledgerd serves TLS),
// CookieName otherwise; always HttpOnly, SameSite=Strict, Path=/, no
// Domain. A positive maxAge gives it a Max-Age in whole seconds (ledgerd:
// the sessions' lifetime); otherwise it lasts as long as the browser.
func SessionCookie(token string, secure bool, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{
		Name:     cookieName(secure),
		Value:    token,
		Path:     "/",
		Secure:   secure,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	}
	if maxAge > 0 {
		c.MaxAge = max(int(maxAge/time.Second), 1)
	}
	return c
}

// ClearSessionCookie returns the cookie that removes the session cookie
// from the browser (Max-Age=0), for a sign-out.
func ClearSessionCookie(secure bool) *http.Cookie {
	c := SessionCookie("", secure, 0)
	c.MaxAge = -1
	return c
}

// SessionToken returns the session token of r's session cookie (the one
// SessionCookie names for secure), if it has one.
func SessionToken(r *http.Request, secure bool) (string, bool) {
	c, err := r.Cookie(cookieName(secure))
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

// CheckCSRF reports whether submitted, the CSRF token a form sent, is the
// session's (sessionCSRF, from Login or Lookup), compared in constant
// time. An empty session token matches nothing.
func CheckCSRF(sessionCSRF, submitted string) bool {
	return sessionCSRF != "" && subtle.ConstantTimeCompare([]byte(sessionCSRF), []byte(submitted)) == 1
}

// ErrCrossOrigin is CheckOrigin's refusal, wrapped with its reason.
var ErrCrossOrigin = errors.New("cross-origin request refused")

// CheckOrigin returns nil if r, a request that changes state, comes from
// a page of the same origin by the browser's own word; otherwise an
// error wrapping ErrCrossOrigin. It accepts r when:
//
//   - its Sec-Fetch-Site header is "same-origin" (any other value is
//     refused, "same-site" and "none" included); or, without that
//     header (browsers before 2023),
//   - its Origin header is the URL of a host equal to r.Host, or one of
//     trusted ("https://ledger.example.com", for a proxy that changes
//     the Host header).
//
// A request with neither header is refused: every current browser sends
// one with a POST, and a script (curl) must send one
// (-H 'Sec-Fetch-Site: same-origin'). This is net/http's
// CrossOriginProtection made strict: that one lets requests without
// either header through, and passes GET, HEAD and OPTIONS, which this
// checks like any other.
func CheckOrigin(r *http.Request, trusted ...string) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site != "same-origin" {
			return fmt.Errorf("%w: Sec-Fetch-Site is %.32q, not \"same-origin\"", ErrCrossOrigin, site)
		}
		return nil
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return fmt.Errorf("%w: neither Sec-Fetch-Site nor Origin is sent", ErrCrossOrigin)
	}
	if slices.Contains(trusted, origin) {
		return nil
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && u.Host == r.Host &&
		(u.Scheme == "https" || u.Scheme == "http") && u.Path == "" && u.RawQuery == "" && u.User == nil {
		return nil
	}
	return fmt.Errorf("%w: Origin %.128q is not this host's", ErrCrossOrigin, origin)
}

// AuthorizationError is RefuseBearer's refusal: the request carries an
// Authorization header, never an approver's credential.
type AuthorizationError struct{}

func (*AuthorizationError) Error() string {
	return "a mediator token can never approve: the approver's page takes only its session cookie, never an Authorization header"
}

// RefuseBearer returns an *AuthorizationError if r has an Authorization
// header, whatever its scheme or value (which the error never repeats):
// the approver's page authenticates by its session cookie only, so a
// mediator's bearer token is refused (ledgerd: 403), never looked up,
// even alongside a valid session cookie.
func RefuseBearer(r *http.Request) error {
	if _, ok := r.Header["Authorization"]; ok {
		return &AuthorizationError{}
	}
	return nil
}
