// Credentials: the Bearer scheme, and the guard of the read endpoints
// (docs/api.md, the opening section and "Read").

package main

import (
	"net/http"
	"strings"
)

// bearerToken returns the token of an Authorization header value in the
// Bearer scheme (RFC 6750 §2.1): the scheme's name, matched without
// regard to case (RFC 9110 §11.1), one or more spaces, and the token. A
// header without the scheme, or with an empty token, yields false.
func bearerToken(authorization string) (string, bool) {
	const scheme = "bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	token := strings.TrimLeft(authorization[len(scheme):], " ")
	return token, token != ""
}

// readAuth guards a read endpoint when the config protects reads.
func (s *server) readAuth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.ReaderTokensSHA256) > 0 {
			token, ok := bearerToken(r.Header.Get("Authorization"))
			if !ok || !s.cfg.mayRead(token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
				writeError(w, http.StatusUnauthorized, "unauthenticated", "reads need a reader or mediator token")
				return
			}
		}
		h(w, r)
	})
}
