// Health (docs/api.md "Read"): GET /healthz and GET /readyz, open to all.

package main

import (
	"fmt"
	"net/http"
)

// healthz answers while the process runs.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }

// ready answers 200 once the ledger accepts appends and 503 after a
// storage failure stopped it; an instance of a cluster answers as
// node.ready says (cluster.go).
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if s.cluster != nil {
		s.cluster.ready(w, r)
		return
	}
	if err := s.l.Failure(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "appends are stopped after a storage failure")
		return
	}
	fmt.Fprintln(w, "ready")
}
