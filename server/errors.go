// Error answers: the JSON error body every endpoint uses, and the
// parsing of parameters that answers with it (docs/api.md).

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

// apiError is the JSON body of every error response. Messages name fields
// and rules, never submitted values.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError answers with status and the JSON error body: code, and the
// message format makes of args, which must never be a submitted value.
func WriteError(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]apiError{"error": {Code: code, Message: fmt.Sprintf(format, args...)}})
}

// refuse answers an append with an error and counts it by code. The
// client has WriteTimeout from now to take the answer.
func (s *Server) refuse(w http.ResponseWriter, status int, code, format string, args ...any) {
	s.m.Reject(code)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
	WriteError(w, status, code, format, args...)
}

// storeDamaged reports whether err says the store is damaged
// (ledger.ErrCorrupt: its records contradict themselves, or it lost
// something they say it holds, such as a tile of its tree). A request
// that meets damage is answered 500, never 404: "not found" is a definite
// answer about the log, which a damaged store cannot give. Each is counted
// in ledgerd_store_damage_total; the first is logged, the later ones only
// counted (ledgerd fsck, with ledgerd stopped, names all of the damage).
func (s *Server) storeDamaged(ctx context.Context, err error) bool {
	if !errors.Is(err, ledger.ErrCorrupt) {
		return false
	}
	s.m.Damage()
	if s.damageLogged.CompareAndSwap(false, true) {
		s.log.ErrorContext(ctx, "the store is damaged: a request found it; later ones are counted in ledgerd_store_damage_total, not logged: "+
			"stop ledgerd and run ledgerd fsck, which names the damage (docs/operations.md)", "error", err)
	}
	return true
}

// damaged answers a read whose err says the store is damaged
// (storeDamaged) with 500, what (the thing read) named, and reports
// whether it did.
func (s *Server) damaged(w http.ResponseWriter, r *http.Request, err error, what string) bool {
	if !s.storeDamaged(r.Context(), err) {
		return false
	}
	WriteError(w, http.StatusInternalServerError, "internal", "%s could not be read: the store is damaged", what)
	return true
}

// unrouted answers what no route serves, in place of ServeMux's plain-text
// 404 and 405. Registered as "/", it gets only the requests no route's
// pattern matches: a path that a route serves with another method is
// answered 405 method_not_allowed with Allow (as ServeMux would), any
// other 404 not_found.
type unrouted struct {
	mux     *http.ServeMux
	methods []string // the route table's, and HEAD, which GET routes serve
}

func newUnrouted(mux *http.ServeMux, table []route) unrouted {
	u := unrouted{mux: mux}
	for _, rt := range table {
		method, _, _ := strings.Cut(rt.pattern, " ")
		u.methods = append(u.methods, method)
		if method == http.MethodGet {
			u.methods = append(u.methods, http.MethodHead)
		}
	}
	slices.Sort(u.methods)
	u.methods = slices.Compact(u.methods)
	return u
}

func (u unrouted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range u.methods {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := u.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		WriteError(w, http.StatusNotFound, "not_found", "no endpoint has this path (docs/api.md lists them)")
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "this path is served only with %s", strings.Join(allow, ", "))
}

// parseIndex parses a parameter that is a decimal integer, spelled
// exactly as strconv.FormatUint spells it. A refusal names the parameter
// (what), never the text.
func parseIndex(w http.ResponseWriter, text, what string) (uint64, bool) {
	if text == "" {
		WriteError(w, http.StatusBadRequest, "invalid_request", "%s is missing", what)
		return 0, false
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != text {
		WriteError(w, http.StatusBadRequest, "invalid_request", "%s is not a decimal integer", what)
		return 0, false
	}
	return v, true
}
