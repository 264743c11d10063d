package main

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/config"
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
// clients cannot use up the descriptors the store needs, and those of one
// source (an IPv4 address, an IPv6 /64) at
// Config.MaxConnectionsPerSource, so that one client cannot take them all.
// At either cap it does not simply wait for those bounds to free a slot:
//
//   - at a source's cap, a new connection from it takes the place of the
//     source's own connection that has waited longest without a complete
//     request header, at once; if all of them are busy with requests, the
//     newcomer is closed at once. A source flooding ledgerd with
//     connections therefore only ever displaces its own, and never makes
//     ledgerd wait;
//   - at max_connections, a new connection takes the place of the one
//     that has waited longest without a complete request header, an idle
//     keep-alive connection at once, one that has not sent a byte yet
//     once it has had silentGrace (250 ms) to send one, one that has sent
//     part of its header once it has had freshGrace (2 s) from its first
//     byte to send the rest.
//
// A client that keeps connections idle therefore delays no one, and
// connections that send nothing are displaced at 4 a second per slot,
// where a cap alone would let them hold every slot for a timeout at a time
// (nginx reuses idle keep-alive connections the same way when it runs
// short). A client sends its first byte as soon as its connection is made
// (the request, or a TLS hello), so that silentGrace is spent only by a
// connection that means to send nothing. A connection whose request is
// being read or served is never closed for another.

// newHTTPServer returns ledgerd's http.Server for s and the listener it
// must serve: ln with the connection caps of the config.
func newHTTPServer(s *server, ln net.Listener) (*http.Server, net.Listener, error) {
	if _, _, err := s.cfg.ConnectionCaps(); err != nil {
		return nil, nil, err
	}
	h := s.routes()
	return newHTTPServerFor(s.cfg, s.log, s.m, h, ln)
}

// headerTimeout bounds the arrival of a request's header.
const headerTimeout = 10 * time.Second

// newHTTPServerFor returns the http.Server serving h as the config says,
// counting connections in m, and the listener it must serve.
func newHTTPServerFor(cfg *config.Config, log *slog.Logger, m *metrics, h http.Handler, ln net.Listener) (*http.Server, net.Listener, error) {
	maxConns, perSource, err := cfg.ConnectionCaps()
	if err != nil {
		return nil, nil, err
	}
	idle, _ := cfg.IdleTimeoutDuration()
	write, _ := cfg.WriteTimeoutDuration()
	cl := newConnLimiter(ln, maxConns, perSource)
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

// connLimiter is a listener that has at most max connections open, and at
// most perSource from one source (none when perSource >= max). At a
// source's cap, Accept makes room for the connection it accepted by
// closing the source's connection that has waited longest without a
// complete request header, or closes the newcomer if there is none. At
// max, it closes the connection that has waited longest without a
// complete request header, if one is displaceable: an idle keep-alive
// connection (its client had its answers) at once, a silent one after
// silentGrace, one with part of a header after freshGrace (time enough to
// send it, so that legitimate clients arriving in a burst do not displace
// one another). Otherwise it holds the newcomer until a connection closes
// or becomes displaceable. It learns the state of connections from
// http.Server's ConnState hook (connState), and from their reads
// (limitedConn.Read).
type connLimiter struct {
	net.Listener
	max, perSource int

	mu        sync.Mutex
	freed     sync.Cond // a connection closed or became displaceable, or the listener closed
	open      int
	waiting   bool // Accept waits on freed
	closed    bool
	reclaimed uint64 // connections closed to make room for another
	refused   uint64 // newcomers closed at once at their source's cap
	// Connections without a complete request header, oldest first:
	// silent ones, accepted and yet to send a byte; fresh ones, that have
	// sent part of their first header; and idle ones, served and waiting
	// for (the end of) another header.
	silent, fresh, idle connList
	// The sources that have connections open, with perSource < max.
	sources map[netip.Addr]*source
}

// silentGrace is how long a new connection has to send its first byte,
// and freshGrace how long from its first byte to send its first header,
// before a newcomer at max_connections may take its place.
const (
	silentGrace = 250 * time.Millisecond
	freshGrace  = 2 * time.Second
)

// source is the connections from one source address.
type source struct {
	addr netip.Addr
	open int
	// Its connections without a complete request header, in the order
	// in which they came to wait for one (accepted or served).
	waiting connList
}

type limitedConn struct {
	net.Conn
	l     *connLimiter
	src   *source   // nil without a per-source cap, or if not TCP
	list  *connList // &l.silent, &l.fresh, &l.idle, or nil
	since time.Time // when it joined list
	// Its links in list and in src.waiting, which it is on whenever it
	// is on list.
	link, srcLink link
	heard         atomic.Bool // it has sent a byte
	closed        bool
}

type link struct{ prev, next *limitedConn }

// connList is a list of connections in the order they joined it, linked
// through their link, or for a source's list their srcLink.
type connList struct {
	head, tail *limitedConn
	bySource   bool
}

func newConnLimiter(ln net.Listener, max, perSource int) *connLimiter {
	l := &connLimiter{Listener: ln, max: max, perSource: perSource, sources: map[netip.Addr]*source{}}
	l.freed.L = &l.mu
	return l
}

// sourceOf is the source of a connection from a: its IPv4 address, or the
// /64 of its IPv6 address (the least a network is given).
func sourceOf(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip := ta.AddrPort().Addr().Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip, ip.IsValid()
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, err := l.admit(c)
		if lc != nil || err != nil {
			return lc, err
		}
	}
}

// admit makes room for c and returns it as a limitedConn, or closes it
// and returns nil when its source's connections are all busy.
func (l *connLimiter) admit(c net.Conn) (*limitedConn, error) {
	addr, perSource := sourceOf(c.RemoteAddr())
	perSource = perSource && l.perSource < l.max
	l.mu.Lock()
	defer l.mu.Unlock()
	if src := l.sources[addr]; perSource && src != nil && src.open >= l.perSource {
		old := src.waiting.head
		if old == nil {
			c.Close()
			l.refused++
			return nil, nil
		}
		l.closeLocked(old)
		l.reclaimed++
	}
	for l.open >= l.max && !l.closed {
		now := time.Now()
		if old := l.displaceable(now); old != nil {
			l.closeLocked(old)
			l.reclaimed++
			continue
		}
		// Wait for a close, an idle connection, or the grace of the
		// oldest silent or fresh one to end.
		var t *time.Timer
		if at, ok := l.nextDisplaceable(); ok {
			t = time.AfterFunc(at.Sub(now), func() {
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
	if perSource {
		// Looked up again: the source may have closed its last
		// connection meanwhile.
		lc.src = l.sources[addr]
		if lc.src == nil {
			lc.src = &source{addr: addr, waiting: connList{bySource: true}}
			l.sources[addr] = lc.src
		}
		lc.src.open++
	}
	l.wait(lc, &l.silent, time.Now())
	return lc, nil
}

// displaceable returns the connection a newcomer at max may replace, or
// nil.
func (l *connLimiter) displaceable(now time.Time) *limitedConn {
	var oldest *limitedConn
	for _, q := range [...]struct {
		c     *limitedConn
		grace time.Duration
	}{{l.idle.head, 0}, {l.silent.head, silentGrace}, {l.fresh.head, freshGrace}} {
		if q.c != nil && now.Sub(q.c.since) >= q.grace && (oldest == nil || q.c.since.Before(oldest.since)) {
			oldest = q.c
		}
	}
	return oldest
}

// nextDisplaceable returns when the oldest silent or fresh connection's
// grace ends, if there is one.
func (l *connLimiter) nextDisplaceable() (at time.Time, ok bool) {
	if c := l.silent.head; c != nil {
		at, ok = c.since.Add(silentGrace), true
	}
	if c := l.fresh.head; c != nil && (!ok || c.since.Add(freshGrace).Before(at)) {
		at, ok = c.since.Add(freshGrace), true
	}
	return at, ok
}

func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook. A connection is silent
// from when it is accepted until it sends a byte (Read), then fresh until
// its first request's header has been read, and idle from the end of a
// response until the next header has been read.
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
			l.wait(lc, &l.idle, time.Now())
			if l.waiting {
				l.freed.Signal()
			}
		}
	case http.StateActive, http.StateHijacked:
		l.unlist(lc)
	}
}

// Read notes c's first byte: a silent connection becomes fresh.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.heard.Load() {
		c.heard.Store(true)
		l := c.l
		l.mu.Lock()
		if c.list == &l.silent {
			l.wait(c, &l.fresh, time.Now())
		}
		l.mu.Unlock()
	}
	return n, err
}

// stats returns the open connections, how many were closed to make room
// for others, and how many were closed at once at their source's cap.
func (l *connLimiter) stats() (open int, reclaimed, refused uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.reclaimed, l.refused
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
	l.unlist(c)
	c.closed = true
	c.Conn.Close()
	l.open--
	if s := c.src; s != nil {
		if s.open--; s.open == 0 {
			delete(l.sources, s.addr)
		}
	}
	if l.waiting {
		l.freed.Signal()
	}
}

// wait puts c at the end of q, one of l's lists, from now, and at the end
// of its source's list if it was on none.
func (l *connLimiter) wait(c *limitedConn, q *connList, now time.Time) {
	if c.list != nil {
		c.list.remove(c)
	} else if c.src != nil {
		c.src.waiting.push(c)
	}
	c.list, c.since = q, now
	q.push(c)
}

// unlist takes c off its list and its source's, if it is on them.
func (l *connLimiter) unlist(c *limitedConn) {
	if c.list == nil {
		return
	}
	c.list.remove(c)
	c.list = nil
	if c.src != nil {
		c.src.waiting.remove(c)
	}
}

func (q *connList) linkOf(c *limitedConn) *link {
	if q.bySource {
		return &c.srcLink
	}
	return &c.link
}

func (q *connList) push(c *limitedConn) {
	k := q.linkOf(c)
	k.prev, k.next = q.tail, nil
	if q.tail != nil {
		q.linkOf(q.tail).next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *connList) remove(c *limitedConn) {
	k := q.linkOf(c)
	if k.prev != nil {
		q.linkOf(k.prev).next = k.next
	} else {
		q.head = k.next
	}
	if k.next != nil {
		q.linkOf(k.next).prev = k.prev
	} else {
		q.tail = k.prev
	}
	k.prev, k.next = nil, nil
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
