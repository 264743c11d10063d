// Package server's API, wired from the config: its options, and the
// http.Server that serves it (a single ledgerd's, and a cluster's
// instance's, cluster.go).

package daemon

import (
	"log/slog"
	"net"
	"net/http"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/server/metrics"
)

// serverOptions are the options of a server.Server that cfg (checked)
// sets, logging to log, counting in m, judging requests by creds; the
// caller adds the ledger and what serves beside it.
func serverOptions(cfg *config.Config, log *slog.Logger, m *metrics.Series, creds *server.Credentials) server.Options {
	body, _ := cfg.BodyTimeoutDuration()
	write, _ := cfg.WriteTimeoutDuration()
	return server.Options{
		Credentials: creds, Logger: log, Metrics: m,
		TilesPrefix: cfg.TilesPrefix, MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: body, WriteTimeout: write,
		TLS: cfg.TLS != nil,
	}
}

// newHTTPServer returns ledgerd's http.Server serving h as cfg says
// (server.NewHTTPServer: the connection caps, idle and write timeouts),
// counting connections in m, and the listener it must serve.
func newHTTPServer(cfg *config.Config, log *slog.Logger, m *metrics.Series, h http.Handler, ln net.Listener) (*http.Server, net.Listener, error) {
	maxConns, perSource, err := cfg.ConnectionCaps()
	if err != nil {
		return nil, nil, err
	}
	idle, _ := cfg.IdleTimeoutDuration()
	write, _ := cfg.WriteTimeoutDuration()
	srv, limited := server.NewHTTPServer(h, ln, server.HTTPOptions{
		MaxConnections: maxConns, MaxConnectionsPerSource: perSource, IdleTimeout: idle, WriteTimeout: write,
		Logger: log, Metrics: m,
	})
	return srv, limited, nil
}
