package server

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/decisionledger/ledger/internal/connlimit"
	"github.com/decisionledger/ledger/server/metrics"
)

// Connections. Every way a client can hold a connection is bounded:
//
//   - the header of a request must arrive within headerTimeout (10 s) of
//     the connection or of the end of the previous response;
//   - a body within Config.BodyTimeout of the header (BodyDeadline); an
//     append without a valid token is answered before its body is read,
//     and its connection closed;
//   - a response must be taken within Config.WriteTimeout (exports and
//     tiles: each 64 KiB of it);
//   - a keep-alive connection may wait Config.IdleTimeout for its next
//     request;
//
// and the listener (package connlimit) caps the connections at
// Config.MaxConnections, so that clients cannot use up the descriptors the
// store needs, and those of one source (an IPv4 address, an IPv6 /64) at
// Config.MaxConnectionsPerSource, so that one client cannot take them all.
// At either cap it displaces a connection that has no request under way
// rather than wait for those bounds to free a slot (connlimit's package
// doc says which and when).

// HTTPOptions are how NewHTTPServer serves: the config's connection
// members.
type HTTPOptions struct {
	// MaxConnections and MaxConnectionsPerSource cap the client
	// connections, of all and of one source (config max_connections and
	// max_connections_per_source, as Config.ConnectionCaps gives them).
	MaxConnections, MaxConnectionsPerSource int
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request (config idle_timeout).
	IdleTimeout time.Duration
	// WriteTimeout bounds the writing of an answer (config
	// write_timeout); a Server gives each 64 KiB of a long one as much.
	WriteTimeout time.Duration
	// Logger gets net/http's own messages (ErrorLog); nil: none.
	Logger *slog.Logger
	// Metrics, if set, count the connections.
	Metrics *metrics.Series
}

// headerTimeout bounds the arrival of a request's header.
const headerTimeout = 10 * time.Second

// NewHTTPServer returns the http.Server serving h as o says, and the
// listener it must serve: ln with o's connection caps.
func NewHTTPServer(h http.Handler, ln net.Listener, o HTTPOptions) (*http.Server, net.Listener) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl := connlimit.New(ln, o.MaxConnections, o.MaxConnectionsPerSource)
	if m := o.Metrics; m != nil {
		m.SetConnections(cl.Stats)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       o.IdleTimeout,
		// Bodies have BodyTimeout (BodyDeadline). ReadTimeout is not
		// used: it would also cancel the context of a request still
		// running when it expires.
		WriteTimeout: o.WriteTimeout,
		ConnState:    cl.ConnState,
		ErrorLog:     ErrorLog(log),
	}
	// Shutdown closes the listener first, then runs this: connections
	// that never sent a byte end at once instead of after net/http's
	// five seconds.
	srv.RegisterOnShutdown(func() { cl.CloseSilent() })
	return srv, cl
}

// ErrorLog makes net/http's own messages (a handler's panic, a failed
// TLS handshake, an error accepting connections) JSON log records like
// every other line of ledgerd's log: a panic at level ERROR, the rest,
// which clients cause, at WARN. For an http.Server's, or an
// httputil.ReverseProxy's, ErrorLog.
func ErrorLog(l *slog.Logger) *log.Logger {
	return log.New(httpLogWriter{l}, "", 0)
}

type httpLogWriter struct{ l *slog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: panic serving") {
		level = slog.LevelError
	}
	w.l.Log(context.Background(), level, "http server", "error", msg)
	return len(p), nil
}

// progressWriter is a response body writer that gives the client
// WriteTimeout for each write, so that a long response (an export) is
// bounded by the client's pace rather than by its length.
type progressWriter struct {
	w  io.Writer
	rc *http.ResponseController
	d  time.Duration
}

func (p progressWriter) Write(b []byte) (int, error) {
	p.rc.SetWriteDeadline(time.Now().Add(p.d))
	return p.w.Write(b)
}

// writeInPieces writes b through p in pieces of at most 64 KiB.
func writeInPieces(p progressWriter, b []byte) {
	for len(b) > 0 {
		n := min(len(b), 64<<10)
		if _, err := p.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}
