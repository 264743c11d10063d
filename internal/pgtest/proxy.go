package pgtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a Server's Unix socket,
// for tests that cut a database connection off half-way: once armed with
// Stall, it stops forwarding one connection, both ways, at a chosen point
// of what the client sends, and keeps both of that connection's sockets
// open, as a network that silently drops everything (or a proxy that
// hangs) would. The server then waits for the rest of the client's bytes,
// and the client for the server's answer.
//
// The proxy reads what a client sends as PostgreSQL frontend messages
// (after the untyped startup packets: a type byte and a 4-byte length,
// the length counting itself), so that a test can cut at a message
// boundary or inside a message.
type Proxy struct {
	srv *Server
	ln  net.Listener

	mu      sync.Mutex
	conns   map[*proxyConn]struct{}
	cut     CutFunc
	stalled *proxyConn
	stallC  chan struct{}
	closed  bool
	next    int
	wg      sync.WaitGroup
}

// Message is a frontend message a client sent through a Proxy.
type Message struct {
	// Type is the message's type byte ('Q' a simple query, 'P' Parse,
	// 'B' Bind, 'E' Execute, 'S' Sync, ...).
	Type byte
	// Data is the whole message: the type byte, the length and the body.
	Data []byte
}

// CutFunc decides, for the index-th message (0 for the first one after
// Stall armed the proxy) sent on the connection numbered conn (in the
// order the proxy accepted them, from 0), whether the connection stalls
// there: keep < 0 forwards the message whole and goes on; keep >= 0
// forwards its first keep bytes (at most all of them) and stalls the
// connection.
type CutFunc func(conn, index int, m Message) (keep int)

type proxyConn struct {
	num            int
	client, server net.Conn
	release        chan struct{} // closed when the connection is let go
	index          int           // messages seen since Stall armed the proxy
	armed          bool
}

// NewProxy starts a proxy in front of s; it is closed when t ends.
func (s *Server) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{srv: s, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL returns dbURL (a URL of the proxy's server) made to connect
// through the proxy.
func (p *Proxy) URL(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(fmt.Sprintf("pgtest: proxy: %v", err))
	}
	host, port, _ := net.SplitHostPort(p.ln.Addr().String())
	q := u.Query()
	q.Set("host", host)
	q.Set("port", port)
	u.RawQuery = q.Encode()
	return u.String()
}

// Stall arms the proxy: every connection's next messages are passed to
// cut, and the first connection for which it returns keep >= 0 stalls
// (see CutFunc). Stalled's channel is closed when that happens. One
// connection stalls per Stall; arming again replaces an unused cut.
func (p *Proxy) Stall(cut CutFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	p.stallC = make(chan struct{})
	for c := range p.conns {
		c.index, c.armed = 0, true
	}
}

// Stalled returns a channel closed once a connection stalled after the
// latest Stall.
func (p *Proxy) Stalled() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallC == nil {
		p.stallC = make(chan struct{})
	}
	return p.stallC
}

// Release closes the stalled connection's sockets, as stopping a hung
// proxy would: the server then reads the end of the connection.
func (p *Proxy) Release() {
	p.mu.Lock()
	c := p.stalled
	p.stalled = nil
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("unix", p.srv.socketPath())
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		c := &proxyConn{num: p.next, client: client, server: server, release: make(chan struct{}), armed: p.cut != nil}
		p.next++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.toServer(c)
		}()
		go func() {
			defer p.wg.Done()
			p.toClient(c)
		}()
	}
}

// socketPath is the path of the server's Unix socket.
func (s *Server) socketPath() string {
	return s.SocketDir + "/.s.PGSQL." + strconv.Itoa(5432)
}

func (c *proxyConn) close() {
	select {
	case <-c.release:
	default:
		close(c.release)
	}
	c.client.Close()
	c.server.Close()
}

func (c *proxyConn) isStalled() bool {
	select {
	case <-c.release:
		return true
	default:
		return false
	}
}

// toServer forwards the client's messages, one at a time, asking the cut
// about each while armed.
func (p *Proxy) toServer(c *proxyConn) {
	defer c.close()
	defer p.forget(c)
	// The startup packets have no type byte: SSLRequest and
	// GSSENCRequest (answered by the server with one byte), then the
	// startup message.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c.client, hdr[:4]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 || n > 1<<20 {
			return
		}
		pkt := make([]byte, n)
		copy(pkt, hdr[:4])
		if _, err := io.ReadFull(c.client, pkt[4:]); err != nil {
			return
		}
		if _, err := c.server.Write(pkt); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(pkt[4:8])
		if code != 80877103 && code != 80877104 { // not SSLRequest, GSSENCRequest
			break
		}
	}
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if n < 4 || n > 1<<30 {
			return
		}
		msg := make([]byte, 1+n)
		copy(msg, hdr[:])
		if _, err := io.ReadFull(c.client, msg[5:]); err != nil {
			return
		}
		keep := p.decide(c, Message{Type: hdr[0], Data: msg})
		if keep < 0 {
			if _, err := c.server.Write(msg); err != nil {
				return
			}
			continue
		}
		if _, err := c.server.Write(msg[:min(keep, len(msg))]); err != nil {
			return
		}
		<-c.release
		return
	}
}

// decide asks the cut about m, and stalls c if it says so.
func (p *Proxy) decide(c *proxyConn, m Message) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.armed || p.cut == nil || p.stalled != nil {
		return -1
	}
	i := c.index
	c.index++
	keep := p.cut(c.num, i, m)
	if keep < 0 {
		return -1
	}
	p.stalled, p.cut = c, nil
	if p.stallC == nil {
		p.stallC = make(chan struct{})
	}
	close(p.stallC)
	return keep
}

// toClient forwards the server's bytes until the connection stalls.
func (p *Proxy) toClient(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled == c
			p.mu.Unlock()
			if stalled || c.isStalled() {
				<-c.release
				return
			}
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				c.close()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.close()
			}
			return
		}
	}
}

func (p *Proxy) forget(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	if p.stalled == c {
		p.stalled = nil
	}
	p.mu.Unlock()
}
