package main

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Connections. Every way a client can hold a connection is bounded:
//
//   - the header of a request must arrive within headerTimeout (10 s) of
//     the connection or of the end of the previous response;
//   - a body within Config.BodyTimeout of the header (bodyDeadline); an
//     append without a valid token is answered before its body is read,
//     and its connection closed;
//   - a response must be taken within Config.WriteTimeout (exports and
//     tiles: each 64 KiB of it);
//   - a keep-alive connection may wait Config.IdleTimeout for its next
//     request;
//
// and connLimiter caps the connections at Config.MaxConnections, so that
// clients cannot use up the descriptors the store needs. When the cap is
// reached it does not simply wait for those bounds to free a slot: a new
// connection takes the place of the one that has waited longest without a
// complete request header, an idle keep-alive connection at once, a new
// one once it has had freshGrace (2 s) to send its header. A client that
// keeps connections idle therefore delays no one, and one that opens
// connections and sends nothing delays others by 2 s at most, where a cap
// alone would let either hold every slot for a timeout at a time (nginx
// reuses idle keep-alive connections the same way when it runs short). A
// connection whose request is being read or served is never closed for
// another.

// newHTTPServer returns ledgerd's http.Server for s and the listener it
// must serve: ln with the connection cap of the config.
func newHTTPServer(s *server, ln net.Listener) (*http.Server, net.Listener, error) {
	if _, err := s.cfg.maxConnections(); err != nil {
		return nil, nil, err
	}
	h := s.routes()
	return newHTTPServerFor(s.cfg, s.log, s.m, h, ln)
}

// newHTTPServerFor returns the http.Server serving h as the config says,
// counting connections in m, and the listener it must serve.
func newHTTPServerFor(cfg *Config, log *slog.Logger, m *metrics, h http.Handler, ln net.Listener) (*http.Server, net.Listener, error) {
	maxConns, err := cfg.maxConnections()
	if err != nil {
		return nil, nil, err
	}
	idle, _ := cfg.idleTimeout()
	write, _ := cfg.writeTimeout()
	cl := newConnLimiter(ln, maxConns)
	m.mu.Lock()
	m.connections = cl.stats
	m.mu.Unlock()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idle,
		// Bodies have BodyTimeout (bodyDeadline). ReadTimeout is not
		// used: it would also cancel the context of a request still
		// running when it expires.
		WriteTimeout: write,
		ConnState:    cl.connState,
		ErrorLog:     serverErrorLog(log),
	}
	return srv, cl, nil
}

// serverErrorLog makes net/http's own messages (a handler's panic, a
// failed TLS handshake, an error accepting connections) JSON log records
// like every other line of ledgerd's log: a panic at level ERROR, the rest,
// which clients cause, at WARN.
func serverErrorLog(l *slog.Logger) *log.Logger {
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

// connLimiter is a listener that has at most max connections open. At the
// cap, Accept makes room for the connection it accepted by closing the one
// that has waited longest without a complete request header, if any is
// displaceable: an idle keep-alive connection (its client had its answers)
// at once, a new one after freshGrace (time enough to send a header, so
// that legitimate clients arriving in a burst do not displace one
// another). Otherwise it holds the newcomer until a connection closes or
// becomes displaceable. It learns the state of connections from
// http.Server's ConnState hook (connState).
type connLimiter struct {
	net.Listener
	max int

	mu        sync.Mutex
	freed     sync.Cond // a connection closed or became displaceable, or the listener closed
	open      int
	waiting   bool // Accept waits on freed
	closed    bool
	reclaimed uint64
	// Connections without a complete request header, oldest first:
	// fresh ones, accepted and not yet through their first header, and
	// idle ones, served and waiting for (the end of) another header.
	fresh, idle connList
}

// freshGrace is how long a new connection has to send its first header
// before a newcomer at the cap may take its place.
const freshGrace = 2 * time.Second

type limitedConn struct {
	net.Conn
	l          *connLimiter
	list       *connList // &l.fresh, &l.idle, or nil
	since      time.Time // when it joined list
	prev, next *limitedConn
	closed     bool
}

// connList is a list of connections in the order they joined it.
type connList struct{ head, tail *limitedConn }

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	l := &connLimiter{Listener: ln, max: max}
	l.freed.L = &l.mu
	return l
}

func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.open >= l.max && !l.closed {
		now := time.Now()
		if old := l.displaceable(now); old != nil {
			l.closeLocked(old)
			l.reclaimed++
			continue
		}
		// Wait for a close, an idle connection, or the oldest fresh
		// one's grace to end.
		var t *time.Timer
		if f := l.fresh.head; f != nil {
			t = time.AfterFunc(f.since.Add(freshGrace).Sub(now), func() {
				l.mu.Lock()
				l.freed.Broadcast()
				l.mu.Unlock()
			})
		}
		l.waiting = true
		l.freed.Wait()
		l.waiting = false
		if t != nil {
			t.Stop()
		}
	}
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.open++
	lc := &limitedConn{Conn: c, l: l}
	l.fresh.push(lc, time.Now())
	return lc, nil
}

// displaceable returns the connection a newcomer may replace, or nil.
func (l *connLimiter) displaceable(now time.Time) *limitedConn {
	f, i := l.fresh.head, l.idle.head
	if f != nil && now.Sub(f.since) < freshGrace {
		f = nil
	}
	if i == nil || f != nil && f.since.Before(i.since) {
		return f
	}
	return i
}

func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook. A connection is fresh
// from when it is accepted until its first request's header has been
// read, and idle from the end of a response until the next header has
// been read.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = u.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok || lc.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateIdle:
		if !lc.closed && lc.list != &l.idle {
			lc.remove()
			l.idle.push(lc, time.Now())
			if l.waiting {
				l.freed.Signal()
			}
		}
	case http.StateActive, http.StateHijacked:
		lc.remove()
	}
}

// stats returns the open connections and how many were closed to make
// room for others.
func (l *connLimiter) stats() (open int, reclaimed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.reclaimed
}

func (c *limitedConn) Close() error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.closed {
		l.closeLocked(c)
	}
	return nil
}

// closeLocked closes c and frees its slot. Closing a TCP connection does
// not block, so it is done under the lock: a connection is then never
// counted after it is closed.
func (l *connLimiter) closeLocked(c *limitedConn) {
	c.remove()
	c.closed = true
	c.Conn.Close()
	l.open--
	if l.waiting {
		l.freed.Signal()
	}
}

func (q *connList) push(c *limitedConn, now time.Time) {
	c.list, c.since, c.prev, c.next = q, now, q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

// remove takes c off its list, if it is on one.
func (c *limitedConn) remove() {
	q := c.list
	if q == nil {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.list, c.prev, c.next = nil, nil, nil
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
