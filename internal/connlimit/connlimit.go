// Package connlimit is a net.Listener that caps the connections an HTTP
// server holds open: at most max in all, so that clients cannot use up the
// descriptors the rest of the process needs (ledgerd's store), and at most
// perSource from one source, so that one client cannot take them all.
// ledgerd serves through it with max_connections and
// max_connections_per_source (docs/config.md).
//
// # Sources
//
// The source of a TCP connection is its remote IPv4 address, or the /64
// of its IPv6 address (the least a network is given); an IPv4-mapped IPv6
// address is its IPv4 address. A connection that is not TCP has no source
// and counts only against max. A perSource of max or more caps no source.
//
// # Displacing
//
// A connection waits for a request header from when it is accepted, and
// again from the end of each response (keep-alive): it is silent until it
// sends its first byte, then fresh until its first header has been read,
// and idle from the end of a response until the next header has been
// read. At either cap the listener does not simply wait for the server's
// timeouts to free a slot:
//
//   - at a source's cap, a new connection from it takes the place of the
//     source's own connection that has waited longest for a header, at
//     once; if all of them are busy with requests, the newcomer is closed
//     at once (refused). A source flooding the server with connections
//     therefore only ever displaces its own, and never makes the server
//     wait;
//   - at max, a new connection takes the place of the one that has waited
//     longest for a header (reclaimed), if it is displaceable: an idle
//     keep-alive connection at once, a silent one once it has had
//     SilentGrace (250 ms) to send a byte, a fresh one once it has had
//     FreshGrace (2 s) from its first byte to send the rest of its header
//     (time enough, so that legitimate clients arriving in a burst do not
//     displace one another). Otherwise Accept holds the newcomer until a
//     connection closes or becomes displaceable.
//
// A client that keeps connections idle therefore delays no one, and
// connections that send nothing are displaced at 4 a second per slot,
// where a cap alone would let them hold every slot for a timeout at a time
// (nginx reuses idle keep-alive connections the same way when it runs
// short). A client sends its first byte as soon as its connection is made
// (the request, or a TLS hello), so that SilentGrace is spent only by a
// connection that means to send nothing. A connection whose request is
// being read or served is never closed for another.
//
// The listener learns that a header has been read, and that a response
// has ended, from the http.Server's ConnState hook: a server MUST set
// ConnState to the Listener's, else a connection serving a request would
// count as waiting for its header and be displaced. Connections wrapped
// by crypto/tls (tls.NewListener over the Listener) are recognised through
// their NetConn.
package connlimit

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a listener that has at most max connections open, and at
// most perSource from one source (none when perSource >= max). At a
// source's cap, Accept makes room for the connection it accepted by
// closing the source's connection that has waited longest without a
// complete request header, or closes the newcomer if there is none. At
// max, it closes the connection that has waited longest without a
// complete request header, if one is displaceable: an idle keep-alive
// connection (its client had its answers) at once, a silent one after
// SilentGrace, one with part of a header after FreshGrace. Otherwise it
// holds the newcomer until a connection closes or becomes displaceable.
// It learns the state of connections from http.Server's ConnState hook
// (Listener.ConnState), and from their reads (limitedConn.Read).
type Listener struct {
	ln             net.Listener
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

// SilentGrace is how long a new connection has to send its first byte,
// and FreshGrace how long from its first byte to send its first header,
// before a newcomer at max may take its place.
const (
	SilentGrace = 250 * time.Millisecond
	FreshGrace  = 2 * time.Second
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
	l     *Listener
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

// New returns a Listener that accepts from ln at most max connections
// open at a time, and at most perSource from one source (none when
// perSource >= max). Both must be at least 1.
func New(ln net.Listener, max, perSource int) *Listener {
	l := &Listener{ln: ln, max: max, perSource: perSource, sources: map[netip.Addr]*source{}}
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

// Accept waits for a connection and returns it once it has a place: at
// max, it may wait for one to be freed or to become displaceable.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		lc, err := l.admit(c)
		if err != nil {
			// Not lc: a nil *limitedConn in a net.Conn is not nil.
			return nil, err
		}
		if lc != nil {
			return lc, nil
		}
	}
}

// admit makes room for c and returns it as a limitedConn, or closes it
// and returns nil when its source's connections are all busy.
func (l *Listener) admit(c net.Conn) (*limitedConn, error) {
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
func (l *Listener) displaceable(now time.Time) *limitedConn {
	var oldest *limitedConn
	for _, q := range [...]struct {
		c     *limitedConn
		grace time.Duration
	}{{l.idle.head, 0}, {l.silent.head, SilentGrace}, {l.fresh.head, FreshGrace}} {
		if q.c != nil && now.Sub(q.c.since) >= q.grace && (oldest == nil || q.c.since.Before(oldest.since)) {
			oldest = q.c
		}
	}
	return oldest
}

// nextDisplaceable returns when the oldest silent or fresh connection's
// grace ends, if there is one.
func (l *Listener) nextDisplaceable() (at time.Time, ok bool) {
	if c := l.silent.head; c != nil {
		at, ok = c.since.Add(SilentGrace), true
	}
	if c := l.fresh.head; c != nil && (!ok || c.since.Add(FreshGrace).Before(at)) {
		at, ok = c.since.Add(FreshGrace), true
	}
	return at, ok
}

// Close closes the listener; an Accept waiting for a place returns
// net.ErrClosed. Connections already accepted stay open.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.ln.Close()
}

// Addr returns the address of the listener beneath.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// ConnState is the http.Server's ConnState hook. A connection is silent
// from when it is accepted until it sends a byte (Read), then fresh until
// its first request's header has been read, and idle from the end of a
// response until the next header has been read. Connections the Listener
// did not accept are ignored.
func (l *Listener) ConnState(c net.Conn, state http.ConnState) {
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

// Stats returns the connections open, how many were closed to make room
// for others (reclaimed), and how many newcomers were closed at once at
// their source's cap (refused).
func (l *Listener) Stats() (open int, reclaimed, refused uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.reclaimed, l.refused
}

// CloseSilent closes every connection that has not sent a byte and
// returns how many, for a server shutting down: no request can be lost
// (none has begun to arrive), and net/http's Shutdown would otherwise
// wait five seconds for each to send one (it takes a new connection for
// idle only then). Connections that have sent part of a request are left
// to finish or time out.
func (l *Listener) CloseSilent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := l.silent.head; c != nil; c = l.silent.head {
		l.closeLocked(c)
		n++
	}
	return n
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
func (l *Listener) closeLocked(c *limitedConn) {
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
func (l *Listener) wait(c *limitedConn, q *connList, now time.Time) {
	if c.list != nil {
		c.list.remove(c)
	} else if c.src != nil {
		c.src.waiting.push(c)
	}
	c.list, c.since = q, now
	q.push(c)
}

// unlist takes c off its list and its source's, if it is on them.
func (l *Listener) unlist(c *limitedConn) {
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
