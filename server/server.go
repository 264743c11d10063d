// Package server is ledgerd's HTTP API (docs/api.md) as a library: New
// builds a Server from explicit dependencies — the ledger it serves, the
// action catalog, the policy set in force and its archive, the
// approvals' state, the witnesses, the credentials in force, the
// request limits, a logger and the metrics — and Handler serves it. It
// reads no config file: package daemon turns the config into Options,
// and reloads the credentials and the policy set (on ledgerd's SIGHUP).
//
// One file per resource, each opening with the endpoints it serves and
// the section of docs/api.md: entries.go, decide.go, outcomes.go,
// approvals_mediator.go (the mediators' approval endpoints), proofs.go,
// tiles.go, checkpoints.go, actions.go, policies.go and health.go;
// routes.go is the route table, auth.go the guards, errors.go the JSON
// error body, credentials.go and ratelimit.go the credentials in force,
// conns.go the http.Server. Beside them, in their own packages: the
// approver's page (approverpage), the approvals' state (approvals), the
// policy set in force and its archive (policies) and the series
// (metrics).
//
// An instance of a cluster (several ledgerd on one PostgreSQL database)
// runs a Server per sequencing term, and a follower's Server, whose
// routes but the reads it serves itself are forwarded (Options.Forward):
// the cluster itself (the lease, the terms, forwarding) is the command's.
package server

import (
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/approverpage"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/witness"
)

// Options are a Server's dependencies. The zero value of each optional
// member is said.
type Options struct {
	// Ledger is the log served; required.
	Ledger *ledger.Ledger
	// Catalog is the action catalog (catalog.Load); nil: none, any
	// action is appended as a version 1 entry.
	Catalog catalog.Catalog
	// Policies is the policy set in force and its archive
	// (policies.New); nil: the server does not decide and serves no
	// archived set.
	Policies *policies.Archive
	// Approvals is the approvals' state (NewApprovals); nil when the
	// config has no approvals member: the approval endpoints answer
	// approvals_off.
	Approvals *approvals.State
	// Witnesses gather cosignatures (package witness); nil without
	// witnesses.
	Witnesses *witness.Set
	// Credentials are the credentials in force (NewCredentials), which
	// the command's reload replaces; required.
	Credentials *Credentials
	// Logger is the log; nil: none.
	Logger *slog.Logger
	// Metrics are the series /metrics serves (metrics.New); nil: New
	// makes them.
	Metrics *metrics.Series

	// TilesPrefix is the path under which the tlog-tiles read API is
	// served (config tiles_prefix).
	TilesPrefix string
	// MaxBodyBytes bounds a mediator's request body (config
	// max_body_bytes); required.
	MaxBodyBytes int64
	// BodyTimeout is how long a request's body may take to arrive
	// (config body_timeout); zero: config.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// WriteTimeout is how long a client may take to read an answer, or
	// each 64 KiB of an export or a tile (config write_timeout); zero:
	// config.DefaultWriteTimeout.
	WriteTimeout time.Duration
	// TLS says the API is served over TLS: the approver's session
	// cookie is then Secure.
	TLS bool

	// Cluster says the server is one instance of several on one
	// database: every 503 of an append says when to retry
	// (Retry-After), and the metrics' tree and checkpoint series
	// follow the instance's role (the command sets them with
	// Series.SetLog) rather than this server's ledger.
	Cluster bool
	// Ready answers GET /readyz; nil: 200 while the ledger takes
	// appends, 503 once a storage failure stopped them.
	Ready http.HandlerFunc
	// Forward makes the server a cluster's follower: every route that
	// Local does not list is forwarded by Forward, behind the guard of
	// the route (a follower checks a mediator's or a reader's token
	// itself before forwarding; the approver's page is forwarded as it
	// is). Nil: every route is served here.
	Forward http.HandlerFunc
	// Local are the route patterns (RoutePatterns) a follower serves
	// itself, with Forward.
	Local []string
}

// Server is ledgerd's HTTP API (docs/api.md).
type Server struct {
	l     *ledger.Ledger
	log   *slog.Logger
	m     *metrics.Series
	creds *Credentials
	cat   catalog.Catalog
	pol   *policies.Archive
	appr  *approvals.State
	wit   *witness.Set
	page  *approverpage.Page // the approver's page

	tilesPrefix               string
	maxBodyBytes              int64
	secure                    bool // served over TLS
	bodyTimeout, writeTimeout time.Duration
	cluster                   bool
	ready                     http.HandlerFunc
	forward                   http.HandlerFunc
	local                     []string

	// handler is the route table, made by New.
	handler http.Handler

	// failureLogged is set once a refusal after a storage failure was
	// logged: the later ones are only counted.
	failureLogged atomic.Bool
	// damageLogged is set once a request that found the store damaged was
	// logged: the later ones are only counted (storeDamaged).
	damageLogged atomic.Bool
}

// New makes the Server of opts.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Ledger == nil:
		return nil, errors.New("server: Options.Ledger is nil")
	case opts.Credentials == nil:
		return nil, errors.New("server: Options.Credentials is nil")
	case opts.MaxBodyBytes <= 0:
		return nil, errors.New("server: Options.MaxBodyBytes is not positive")
	}
	s := &Server{
		l: opts.Ledger, log: opts.Logger, m: opts.Metrics, creds: opts.Credentials,
		cat: opts.Catalog, pol: opts.Policies, appr: opts.Approvals, wit: opts.Witnesses,
		tilesPrefix: opts.TilesPrefix, maxBodyBytes: opts.MaxBodyBytes, secure: opts.TLS,
		bodyTimeout: opts.BodyTimeout, writeTimeout: opts.WriteTimeout,
		cluster: opts.Cluster, ready: opts.Ready, forward: opts.Forward, local: opts.Local,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.page = approverpage.New(approverpage.Options{Approvals: s.appr, Ledger: s.l, TLS: s.secure, Logger: s.log,
		Damaged: s.storeDamaged, WriteError: WriteError, RefusedBodyGrace: refusedBodyGrace})
	s.handler = s.routes()
	return s, nil
}

// Handler serves the API: every route of RoutePatterns, and a JSON 404
// or 405 for what no route serves. A follower's (Options.Forward) is
// the bare route table: the command wraps it, with the sequencer's
// handler, in BodyDeadline.
func (s *Server) Handler() http.Handler { return s.handler }

// credentials are the credentials in force now. A request takes them
// once and judges with those.
func (s *Server) credentials() *credentials { return s.creds.load() }
