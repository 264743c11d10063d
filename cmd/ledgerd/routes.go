// The route table of ledgerd's HTTP API (docs/api.md), and what wraps it:
// the only place that calls mux.Handle.

package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

func (s *server) routes() http.Handler {
	if s.m == nil {
		s.m = newMetrics()
	}
	s.m.treeSize, s.m.checkpointTime = s.l.Size, s.l.CheckpointTime
	s.rl = newLimiter(s.cfg)
	// The config was checked at load; a test's change to it that does
	// not parse gets the default.
	var err error
	if s.bodyTimeout, err = s.cfg.bodyTimeout(); err != nil {
		s.bodyTimeout = defaultBodyTimeout
	}
	if s.writeTimeout, err = s.cfg.writeTimeout(); err != nil {
		s.writeTimeout = defaultWriteTimeout
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.m)
	mux.HandleFunc("POST /v1/entries", s.appendEntry)
	read := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.readAuth(h)) }
	read("GET /v1/checkpoint", s.checkpoint)
	read("GET /v1/entries/{index}", s.getEntry)
	read("GET /v1/export", s.export)
	read("GET /v1/proofs/{index}", s.tlogProof)
	read("GET /v1/inclusion", s.inclusion)
	read("GET /v1/consistency", s.consistency)
	read("GET /v1/actions", s.actions)
	read("GET /v1/actions/{action}", s.action)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	prefix := strings.TrimSuffix(s.cfg.TilesPrefix, "/")
	read("GET "+prefix+"/checkpoint", s.checkpoint)
	read("GET "+prefix+"/tile/{path...}", s.tile)
	return s.bodyDeadline(mux)
}

// bodyDeadline gives every request that has a body BodyTimeout to send
// it. Without a deadline, a client that sends a header and part of a body
// holds its connection for ever: even when the handler never reads the
// body, net/http reads (up to 256 KiB of) it after the handler, to reuse
// the connection. Requests without a body get no read deadline here: it
// would cancel their context while they run (net/http's background read).
func (s *server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // -1: chunked, length unknown
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		h.ServeHTTP(w, r)
	})
}
