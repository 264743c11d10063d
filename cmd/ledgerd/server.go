package main

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/witness"
)

// server is ledgerd's HTTP API (docs/api.md).
type server struct {
	cfg *config.Config
	l   *ledger.Ledger
	log *slog.Logger
	m   *metrics // nil: routes makes one
	// creds are the credentials in force (reload.go), shared with the
	// reload; routes makes them from cfg if nil.
	creds *liveCredentials
	cat   catalog.Catalog // nil: no catalog
	// pol is the policy set in force and its archive; routes makes one
	// without a set if nil.
	pol *policies
	// appr is the approvals' state (approvals.go); nil when the config
	// has no approvals member.
	appr *approvalsState
	// wit gathers witness cosignatures (package witness); nil when the
	// config lists no witness.
	wit *witness.Set
	// cluster is the instance's part among several on one PostgreSQL
	// database (cluster.go); nil for a single ledgerd.
	cluster *node
	// handler is routes' result, kept by a cluster's term (cluster.go).
	handler http.Handler

	bodyTimeout, writeTimeout time.Duration // from cfg, set by routes
	// failureLogged is set once a refusal after a storage failure was
	// logged: the later ones are only counted.
	failureLogged atomic.Bool
	// damageLogged is set once a request that found the store damaged was
	// logged: the later ones are only counted (storeDamaged).
	damageLogged atomic.Bool
}

// credentials are the credentials in force now. A request takes them
// once and judges with those.
func (s *server) credentials() *credentials { return s.creds.load() }
