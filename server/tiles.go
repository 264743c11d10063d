package server

import (
	"errors"
	"net/http"

	"github.com/decisionledger/ledger/internal/tlogtiles"
	"github.com/decisionledger/ledger/ledger"
)

// The C2SP tlog-tiles read API, served under Config.TilesPrefix:
//
//	<prefix>/checkpoint
//	<prefix>/tile/<L>/<N>[.p/<W>]
//	<prefix>/tile/entries/<N>[.p/<W>]
//
// internal/tlogtiles spells and parses the paths. Full tiles never change
// and are served as immutable; partial ones only until they fill.

func (s *Server) tile(w http.ResponseWriter, r *http.Request) {
	level, index, width, ok := tlogtiles.ParsePath("tile/" + r.PathValue("path"))
	if !ok {
		WriteError(w, http.StatusNotFound, "not_found", "not a tile path")
		return
	}
	var b []byte
	var err error
	if level < 0 {
		b, err = s.l.EntryBundle(r.Context(), index, width)
	} else {
		b, err = s.l.Tile(r.Context(), uint8(level), index, width)
	}
	if s.damaged(w, r, err, "the tile") {
		return
	}
	if errors.Is(err, ledger.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", "no such tile under the latest checkpoint")
		return
	} else if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", "the tile could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if width == ledger.TileWidth {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	// An entry bundle may be megabytes.
	writeInPieces(progressWriter{w, http.NewResponseController(w), s.writeTimeout}, b)
}
