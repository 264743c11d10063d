// The route table of ledgerd's HTTP API (docs/api.md), and what wraps it:
// the only place that calls mux.Handle.

package server

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/server/approverpage"
	"github.com/decisionledger/ledger/server/metrics"
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
// approver's page, its Guard (package approverpage). docs/openapi.json
// describes exactly these routes (TestOpenAPIRoutes).
func (s *Server) routeTable() []route {
	tiles := strings.TrimSuffix(s.tilesPrefix, "/")
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
		{"GET /readyz", open(s.readyz)},
		{"GET /metrics", open(s.m.ServeHTTP)},
		{"GET " + tiles + "/checkpoint", s.readAuth(s.checkpoint)},
		{"GET " + tiles + "/tile/{path...}", s.readAuth(s.tile)},
	}
	table = append(table, s.approvalRoutes()...)
	page := s.page
	if page == nil { // a bare Server's table, for its patterns
		page = approverpage.New(approverpage.Options{})
	}
	for _, rt := range page.Routes() {
		table = append(table, route{rt.Pattern, rt.Handler})
	}
	return table
}

// RoutePatterns are the ServeMux patterns of every endpoint, in the
// order of docs/api.md, with the tlog-tiles API under tilesPrefix (config
// tiles_prefix).
func RoutePatterns(tilesPrefix string) []string {
	var list []string
	for _, rt := range (&Server{tilesPrefix: tilesPrefix}).routeTable() {
		list = append(list, rt.pattern)
	}
	return list
}

// routes is the Server's handler: the route table, which a follower's
// serves as followerRoutes says, in BodyDeadline.
func (s *Server) routes() http.Handler {
	if s.m == nil {
		s.m = metrics.New()
	}
	if !s.cluster { // a cluster's metrics follow the instance's role
		s.m.SetLog(s.l.Size, s.l.CheckpointTime)
		if s.wit != nil {
			s.m.SetWitnesses(s.wit.Snapshot)
		}
	}
	if s.appr != nil {
		s.appr.SetApprovers(s.creds.approver)
		s.creds.setSessions(s.appr.Sessions)
	}
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = config.DefaultBodyTimeout
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = config.DefaultWriteTimeout
	}
	if s.forward != nil {
		return s.followerRoutes()
	}
	mux := http.NewServeMux()
	table := s.routeTable()
	for _, rt := range table {
		mux.Handle(rt.pattern, rt.handler)
	}
	// What no route serves is answered in JSON too, 404 or 405.
	mux.Handle("/", newUnrouted(mux, table))
	return BodyDeadline(s.bodyTimeout, mux)
}

// followerRoutes is the route table of a follower: the routes of
// s.local served from its view, every other forwarded.
func (s *Server) followerRoutes() http.Handler {
	mux := http.NewServeMux()
	table := s.routeTable()
	for _, rt := range table {
		switch h := rt.handler; {
		case slices.Contains(s.local, rt.pattern):
			mux.Handle(rt.pattern, h)
		default:
			mux.Handle(rt.pattern, s.forwardGuarded(h, s.forward))
		}
	}
	mux.Handle("/", newUnrouted(mux, table))
	return mux
}

// forwardGuarded is forward behind the guard of the route whose handler
// is h: a follower checks a mediator's or a reader's token itself, with
// the credentials it has in force, before forwarding, so that a token
// revoked by its reload is refused there whatever the sequencer's
// credentials. The approver's page is forwarded as it is: its sessions
// and approvers are the sequencer's.
func (s *Server) forwardGuarded(h http.Handler, forward http.HandlerFunc) http.Handler {
	switch h.(type) {
	case mediatorGuard:
		return mediatorGuard{s: s, h: func(w http.ResponseWriter, r *http.Request, _ string) { forward(w, r) }, forwarding: true}
	case readGuard:
		return s.readAuth(forward)
	}
	return forward
}

// BodyDeadline gives every request that has a body bodyTimeout to send
// it. Without a deadline, a client that sends a header and part of a body
// holds its connection for ever: even when the handler never reads the
// body, net/http reads (up to 256 KiB of) it after the handler, to reuse
// the connection. Requests without a body get no read deadline here: it
// would cancel their context while they run (net/http's background read).
func BodyDeadline(bodyTimeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // -1: chunked, length unknown
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		h.ServeHTTP(w, r)
	})
}
