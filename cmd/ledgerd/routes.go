// The route table of ledgerd's HTTP API (docs/api.md), and what wraps it:
// the only place that calls mux.Handle.

package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// route is one endpoint: its ServeMux pattern and its handler, wrapped in
// the guard that says who may call it.
type route struct {
	pattern string
	handler http.Handler
}

// routeTable is every endpoint, in the order of docs/api.md, each wrapped
// on its own line in who may call it: mediatorAuth (a mediator's token),
// readAuth (a reader's or a mediator's token, when the config protects
// reads), open (anyone: health, readiness and metrics) or, for the
// approver's page, approverAuth (approvals_page.go). docs/openapi.json
// describes exactly these routes (TestOpenAPIRoutes).
func (s *server) routeTable() []route {
	tiles := strings.TrimSuffix(s.cfg.TilesPrefix, "/")
	table := []route{
		{"POST /v1/entries", s.mediatorAuth(s.appendEntry)},
		{"POST /v1/decide", s.mediatorAuth(s.decide)},
		{"GET /v1/checkpoint", s.readAuth(s.checkpoint)},
		{"GET /v1/checkpoints/{size}", s.readAuth(s.checkpointAt)},
		{"GET /v1/entries/{index}", s.readAuth(s.getEntry)},
		{"GET /v1/export", s.readAuth(s.export)},
		{"GET /v1/proofs/{index}", s.readAuth(s.tlogProof)},
		{"GET /v1/inclusion", s.readAuth(s.inclusion)},
		{"GET /v1/consistency", s.readAuth(s.consistency)},
		{"GET /v1/actions", s.readAuth(s.actions)},
		{"GET /v1/actions/{action}", s.readAuth(s.action)},
		{"GET /v1/policies", s.readAuth(s.listPolicies)},
		{"GET /v1/policies/{digest}", s.readAuth(s.policyBundle)},
		{"GET /healthz", open(s.healthz)},
		{"GET /readyz", open(s.ready)},
		{"GET /metrics", open(s.m.ServeHTTP)},
		{"GET " + tiles + "/checkpoint", s.readAuth(s.checkpoint)},
		{"GET " + tiles + "/tile/{path...}", s.readAuth(s.tile)},
	}
	table = append(table, s.approvalRoutes()...)
	return append(table, s.pageRoutes()...)
}

func (s *server) routes() http.Handler {
	if s.m == nil {
		s.m = newMetrics()
	}
	s.m.mu.Lock()
	if s.cluster == nil { // a cluster's metrics follow the instance's role
		s.m.treeSize, s.m.checkpointTime = s.l.Size, s.l.CheckpointTime
		if s.wit != nil {
			s.m.witnesses = s.wit.collect
		}
	}
	s.m.mu.Unlock()
	if s.creds == nil {
		s.creds = newLiveCredentials(s.cfg)
	}
	if s.appr != nil {
		s.appr.creds = s.creds
		s.creds.setSessions(s.appr.sessions)
	}
	if s.pol == nil { // ledgerd does not decide; the archive may hold sets
		s.pol = &policies{archive: filepath.Join(s.cfg.StoreDir, archiveDirName), log: s.log, m: s.m}
	}
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
	table := s.routeTable()
	for _, rt := range table {
		mux.Handle(rt.pattern, rt.handler)
	}
	// What no route serves is answered in JSON too, 404 or 405.
	mux.Handle("/", newUnrouted(mux, table))
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
