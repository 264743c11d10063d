package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/ledger"
)

// The C2SP tlog-tiles read API, served under Config.TilesPrefix:
//
//	<prefix>/checkpoint
//	<prefix>/tile/<L>/<N>[.p/<W>]
//	<prefix>/tile/entries/<N>[.p/<W>]
//
// N is written in groups of three digits, all but the last prefixed with
// "x" (1234067 is x001/x234/067). Full tiles never change and are served
// as immutable; partial ones only until they fill.

// tileIndexPath encodes N as tlog-tiles does.
func tileIndexPath(n uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// parseTilePath parses "<L>/<N>[.p/<W>]" or "entries/<N>[.p/<W>]",
// accepting only the canonical spelling. Level -1 means entries.
func parseTilePath(p string) (level int, index uint64, width int, ok bool) {
	width = ledger.TileWidth
	if rest, partial, found := strings.Cut(p, ".p/"); found {
		w, err := strconv.Atoi(partial)
		if err != nil || w < 1 || w >= ledger.TileWidth || strconv.Itoa(w) != partial {
			return 0, 0, 0, false
		}
		p, width = rest, w
	}
	head, indexPath, found := strings.Cut(p, "/")
	if !found {
		return 0, 0, 0, false
	}
	if head == "entries" {
		level = -1
	} else {
		l, err := strconv.Atoi(head)
		if err != nil || l < 0 || l > 7 || strconv.Itoa(l) != head {
			return 0, 0, 0, false
		}
		level = l
	}
	for _, part := range strings.Split(indexPath, "/") {
		part = strings.TrimPrefix(part, "x")
		d, err := strconv.ParseUint(part, 10, 64)
		if err != nil || len(part) != 3 || index > (1<<63)/1000 {
			return 0, 0, 0, false
		}
		index = index*1000 + d
	}
	return level, index, width, tileIndexPath(index) == indexPath
}

func (s *server) tile(w http.ResponseWriter, r *http.Request) {
	level, index, width, ok := parseTilePath(r.PathValue("path"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "not a tile path")
		return
	}
	var b []byte
	var err error
	if level < 0 {
		b, err = s.l.EntryBundle(r.Context(), index, width)
	} else {
		b, err = s.l.Tile(r.Context(), uint8(level), index, width)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no such tile under the latest checkpoint")
		return
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the tile could not be read")
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
