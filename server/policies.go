// Policies (docs/api.md "Decide" and "Policies"):
//
//	GET /v1/policies           the set in force and every archived set
//	GET /v1/policies/{digest}  an archived set's bundle
//
// The set that POST /v1/decide (decide.go) uses, and its archive, are
// package policies'.

package server

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"

	"github.com/decisionledger/ledger/commit"
)

// listPolicies answers GET /v1/policies.
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	list, err := s.pol.List()
	if err != nil {
		s.log.ErrorContext(r.Context(), "listing the policy archive failed", "error", err)
		WriteError(w, http.StatusInternalServerError, "internal", "the policy archive could not be read")
		return
	}
	var current any // null when ledgerd does not decide
	if d := s.pol.CurrentDigest(); d != "" {
		current = d
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"current": current, "archived": list})
}

// policyBundle answers GET /v1/policies/{digest}.
func (s *Server) policyBundle(w http.ResponseWriter, r *http.Request) {
	digest, err := commit.ParseDigest(r.PathValue("digest"))
	if err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", "the digest is not sha256: and 64 lower-case hex digits")
		return
	}
	b, err := s.pol.Bundle(digest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		WriteError(w, http.StatusNotFound, "not_found", "no policy set with this digest was ever published here")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "reading an archived policy set failed", "policy_set", digest.String(), "error", err)
		WriteError(w, http.StatusInternalServerError, "internal", "the policy set could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(b)
}
