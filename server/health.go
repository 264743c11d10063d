// Health (docs/api.md "Read"): GET /healthz and GET /readyz, open to all.

package server

import (
	"fmt"
	"net/http"
)

// healthz answers while the process runs.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }

// readyz answers 200 once the ledger accepts appends and 503 after a
// storage failure stopped it; an instance of a cluster answers as
// Options.Ready says.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		s.ready(w, r)
		return
	}
	if err := s.l.Failure(); err != nil {
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "appends are stopped after a storage failure")
		return
	}
	fmt.Fprintln(w, "ready")
}
