// The action catalog (docs/api.md "Read" and "With an action catalog"):
//
//	GET /v1/actions           the declared actions and their digests
//	GET /v1/actions/{action}  one declaration, byte for byte
//
// Loading the catalog and checking attributes is in package catalog.

package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// actions lists the catalog: each action with its applied-tiers and
// action definition digests.
func (s *Server) actions(w http.ResponseWriter, r *http.Request) {
	if s.cat == nil {
		WriteError(w, http.StatusNotFound, "no_catalog", "this ledger has no action catalog")
		return
	}
	type item struct {
		Action           string `json:"action"`
		TiersDigest      string `json:"tiers_digest"`
		DefinitionDigest string `json:"definition_digest"`
	}
	list := make([]item, 0, len(s.cat))
	for name, a := range s.cat {
		list = append(list, item{name, a.TiersDigest().String(), a.DefinitionDigest().String()})
	}
	slices.SortFunc(list, func(a, b item) int { return strings.Compare(a.Action, b.Action) })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"actions": list})
}

// action serves one declaration file byte for byte, so that an auditor
// can recompute its digests (ledger-verify tiers).
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	a, ok := s.cat[r.PathValue("action")]
	if !ok {
		WriteError(w, http.StatusNotFound, "not_found", "no such action in the catalog")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Ledger-Tiers-Digest", a.TiersDigest().String())
	w.Header().Set("Ledger-Definition-Digest", a.DefinitionDigest().String())
	w.Write(a.File())
}
