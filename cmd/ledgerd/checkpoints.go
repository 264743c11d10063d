// Checkpoints (docs/api.md "Read", and the tlog-tiles checkpoint):
//
//	GET /v1/checkpoint
//	GET <tiles prefix>/checkpoint

package main

import (
	"net/http"
	"strconv"
)

func (s *server) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp, size := s.l.Checkpoint()
	if cp == nil {
		// Only a ledger opened without its first checkpoint (ledger.Open
		// signs one) has none.
		writeError(w, http.StatusNotFound, "no_checkpoint", "no checkpoint has been signed yet")
		return
	}
	// The witnesses' cosignatures gathered so far for it, as extra
	// signature lines (C2SP tlog-cosignature).
	lines, n := s.wit.Cosignatures(size)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if s.wit != nil {
		w.Header().Set("Ledger-Cosignatures", strconv.Itoa(n))
	}
	w.Write(append(cp, lines...))
}
