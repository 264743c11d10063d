// Credentials: the Bearer scheme, and the guards that routes.go wraps
// around every endpoint (docs/api.md, the opening section, "Append" and
// "Read"): mediatorAuth, readAuth and open.

package server

import (
	"net/http"
	"strings"
	"time"
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

// credentialProblem says why r has no bearer token (bearerToken), for a
// 401's message. It never repeats the header's value.
func credentialProblem(r *http.Request) string {
	const want = "(send Authorization: Bearer and the token)"
	h := r.Header.Get("Authorization")
	switch {
	case h == "":
		return "the request has no Authorization header " + want
	case strings.EqualFold(strings.TrimRight(h, " "), "bearer"):
		return "the Authorization header's bearer token is empty " + want
	default:
		return "the Authorization header is not in the Bearer scheme " + want
	}
}

// appendCredentialProblem says why an append's credential was refused:
// none (hasToken false), a reader's token, or an unknown one.
func (s *Server) appendCredentialProblem(r *http.Request, token string, hasToken bool) string {
	switch {
	case !hasToken:
		return "appends need a mediator's token: " + credentialProblem(r)
	case s.credentials().readsProtected() && s.credentials().mayRead(token):
		return "the token is a reader's, which may only read; appends need a mediator's token"
	default:
		return "unknown token: no mediator of this ledger has it"
	}
}

// mediatorHandler is an endpoint only mediators may call: it is given the
// mediator that the credential names.
type mediatorHandler func(w http.ResponseWriter, r *http.Request, mediator string)

// mediatorGuard is mediatorAuth's handler.
type mediatorGuard struct {
	s *Server
	h mediatorHandler
	// forwarding is a follower's guard before forwarding (Options.Forward):
	// the sequencer, which authenticates the request again, counts a
	// previous token's use.
	forwarding bool
}

// mediatorAuth guards an endpoint that needs a mediator's token.
func (s *Server) mediatorAuth(h mediatorHandler) http.Handler { return mediatorGuard{s: s, h: h} }

func (g mediatorGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	token, ok := bearerToken(r.Header.Get("Authorization"))
	mediator, known := "", false
	if ok {
		var previous bool
		mediator, previous, known = s.credentials().authenticate(token)
		if previous && !g.forwarding {
			s.m.PreviousTokenRequest(mediator)
		}
	}
	if !known {
		// The body is not read, and the connection not kept: a client
		// without a credential gets nothing but this answer.
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedBodyGrace))
		w.Header().Set("Connection", "close")
		w.Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
		s.refuse(w, http.StatusUnauthorized, "unauthenticated", "%s", s.appendCredentialProblem(r, token, ok))
		return
	}
	g.h(w, r, mediator)
}

// readGuard is readAuth's handler.
type readGuard struct {
	s *Server
	h http.HandlerFunc
}

// readAuth guards a read endpoint when the config protects reads.
func (s *Server) readAuth(h http.HandlerFunc) http.Handler { return readGuard{s, h} }

func (g readGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	if c := s.credentials(); c.readsProtected() {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok || !c.mayRead(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
			problem := "unknown token: neither a reader's nor a mediator's"
			if !ok {
				problem = "reads need a reader's or a mediator's token: " + credentialProblem(r)
			}
			WriteError(w, http.StatusUnauthorized, "unauthenticated", "%s", problem)
			return
		}
	}
	g.h(w, r)
}

// open marks an endpoint anyone may call, whatever the config: health,
// readiness and metrics.
type open http.HandlerFunc

func (h open) ServeHTTP(w http.ResponseWriter, r *http.Request) { h(w, r) }
