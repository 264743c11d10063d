package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// serve serves, on a loopback port through New(…, max, perSource), GET
// /healthz (200) and POST /upload, which reads its body to the end.
func serve(t *testing.T, max, perSource int) (url string, l *Listener) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "the body ended early", http.StatusBadRequest)
		}
	})
	hs := httptest.NewUnstartedServer(mux)
	l = New(hs.Listener, max, perSource)
	hs.Listener = l
	hs.Config.ConnState = l.ConnState
	hs.Config.ReadHeaderTimeout = 10 * time.Second
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL, l
}

// rawConn is a client connection written and read by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn { return dialRawFrom(t, "127.0.0.1", url) }

// dialRawFrom connects to url from the loopback address src (any
// 127.x.y.z is the machine's own).
func dialRawFrom(t *testing.T, src, url string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c, bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, text string) {
	t.Helper()
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
}

// response reads one response, waiting at most d.
func (c *rawConn) response(d time.Duration) (*http.Response, string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// closedWithin reports whether the server closes the connection (a read
// ends in EOF or a reset, not a timeout) within d.
func (c *rawConn) closedWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.r)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

const healthz = "GET /healthz HTTP/1.1\r\nHost: example.com\r\n\r\n"

// partialUpload is the header of an upload announcing a 1,000-byte body,
// and the body's first bytes.
const partialUpload = "POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" +
	`{"principal":"agent-1",`

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// counts returns the numbers of new connections yet to send their first
// header (silent or fresh), and of idle ones.
func (l *Listener) counts() (fresh, idle int) {
	silent, fresh, idle := l.counts3()
	return silent + fresh, idle
}

// counts3 returns the numbers of silent, fresh and idle connections.
func (l *Listener) counts3() (silent, fresh, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := l.silent.head; c != nil; c = c.link.next {
		silent++
	}
	for c := l.fresh.head; c != nil; c = c.link.next {
		fresh++
	}
	for c := l.idle.head; c != nil; c = c.link.next {
		idle++
	}
	return silent, fresh, idle
}

// checkStats fails t unless l's Stats are open, reclaimed and refused.
func checkStats(t *testing.T, l *Listener, open int, reclaimed, refused uint64) {
	t.Helper()
	if o, rc, rf := l.Stats(); o != open || rc != reclaimed || rf != refused {
		t.Errorf("Stats() = open %d, reclaimed %d, refused %d; want %d, %d, %d", o, rc, rf, open, reclaimed, refused)
	}
}

// At max, a new client takes the place of the connection idle longest;
// the others stay open. (Every connection comes from 127.0.0.1: a
// perSource of 2 sets no cap of its own.)
func TestConnectionCapReclaimsIdle(t *testing.T) {
	url, l := serve(t, 2, 2)
	var idle []*rawConn
	for i := range 2 {
		c := dialRaw(t, url)
		c.send(t, healthz)
		if _, _, err := c.response(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("connection %d to be idle", i), func() bool { f, n := l.counts(); return f == 0 && n == i+1 })
		idle = append(idle, c)
	}
	c := dialRaw(t, url)
	c.send(t, healthz)
	if resp, _, err := c.response(10 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a new client at the cap, with two idle connections: %v", err)
	}
	if !idle[0].closedWithin(10 * time.Second) {
		t.Fatal("the connection idle longest was not closed for the new one")
	}
	if idle[1].closedWithin(200 * time.Millisecond) {
		t.Fatal("the second idle connection was closed too")
	}
	checkStats(t, l, 2, 1, 0)
}

// At max, a connection that has sent nothing keeps its place for
// SilentGrace (250 ms), one that has sent part of its header for
// FreshGrace (2 s) from its first byte; then a new client takes it, well
// before the header timeout (10 s) would have closed it. The new client
// cannot be served before the grace ends (the connection's grace starts
// after the test's clock), nor long after.
func TestConnectionCapReclaimsSilent(t *testing.T) {
	for _, tc := range []struct {
		name, sent string
		grace      time.Duration
	}{
		{"silent", "", 250 * time.Millisecond},
		{"part of a header", "GET /healthz HT", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, l := serve(t, 1, 1)
			start := time.Now()
			first := dialRaw(t, url)
			first.send(t, tc.sent)
			waitFor(t, "the connection to be accepted", func() bool {
				silent, fresh, _ := l.counts3()
				return tc.sent == "" && silent == 1 || tc.sent != "" && fresh == 1
			})
			c := dialRaw(t, url)
			c.send(t, healthz)
			if resp, _, err := c.response(tc.grace + 8*time.Second); err != nil || resp.StatusCode != 200 {
				t.Fatalf("a new client at the cap, the only connection %s: %v", tc.name, err)
			}
			if d := time.Since(start); d < tc.grace {
				t.Errorf("the new client was served %v after the first connected, before its grace (%v) ended", d, tc.grace)
			}
			if !first.closedWithin(5 * time.Second) {
				t.Fatal("the first connection is still open")
			}
		})
	}
}

// At perSource, a source's new connection takes the place of the source's
// own that has waited longest without a request header, at once; when all
// of the source's are busy, the newcomer is closed at once, unanswered.
// Other sources are served meanwhile.
func TestConnectionCapPerSource(t *testing.T) {
	url, l := serve(t, 8, 2)
	for range 2 {
		dialRawFrom(t, "127.0.0.1", url).send(t, partialUpload) // its body is being read
	}
	waitFor(t, "the uploads to be read", func() bool {
		open, _, _ := l.Stats()
		f, n := l.counts()
		return open == 2 && f+n == 0
	})
	refused := dialRawFrom(t, "127.0.0.1", url)
	refused.send(t, healthz)
	if resp, _, err := refused.response(5 * time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection from a source of two busy ones, at perSource 2: %v %v, want it closed unanswered", resp, err)
	}

	var idle []*rawConn
	for i := range 2 {
		c := dialRawFrom(t, "127.0.0.3", url)
		c.send(t, healthz)
		if resp, _, err := c.response(5 * time.Second); err != nil || resp.StatusCode != 200 {
			t.Fatalf("another source's connection %d: %v", i, err)
		}
		waitFor(t, fmt.Sprintf("connection %d to be idle", i), func() bool { _, n := l.counts(); return n == i+1 })
		idle = append(idle, c)
	}
	other := dialRawFrom(t, "127.0.0.2", url)
	other.send(t, healthz)
	if _, _, err := other.response(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the third source's connection to be idle", func() bool { _, n := l.counts(); return n == 3 })
	c := dialRawFrom(t, "127.0.0.3", url)
	c.send(t, healthz)
	if _, _, err := c.response(5 * time.Second); err != nil {
		t.Fatalf("a source's third connection, two of its own idle: %v", err)
	}
	if !idle[0].closedWithin(5 * time.Second) {
		t.Fatal("the source's connection idle longest was not closed for its new one")
	}
	if idle[1].closedWithin(200*time.Millisecond) || other.closedWithin(200*time.Millisecond) {
		t.Fatal("another idle connection was closed too")
	}
	checkStats(t, l, 5, 1, 1)
}

// At max with every connection busy, a new client waits until one is
// done.
func TestConnectionCapHolds(t *testing.T) {
	url, l := serve(t, 1, 1)
	busy := dialRaw(t, url)
	busy.send(t, partialUpload) // its body is being read
	waitFor(t, "the upload to be read", func() bool { f, n := l.counts(); return f+n == 0 })
	c := dialRaw(t, url)
	c.send(t, healthz)
	if _, _, err := c.response(300 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a client beyond max was served while the only connection was busy (%v)", err)
	}
	busy.Close() // the body ends early: the upload is refused, its slot freed
	if resp, _, err := c.response(10 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the waiting client was not served once a connection closed: %v", err)
	}
}

// A source is an IPv4 address, or the /64 of an IPv6 address (an
// IPv4-mapped one is its IPv4 address, a zone is dropped); a connection
// that is not TCP has none.
func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.7:443", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:443", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:80", "2001:db8:1:2::"},
		{"[fe80::1%eth0]:80", "fe80::"},
	} {
		a := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.addr))
		got, ok := sourceOf(a)
		if !ok || got.String() != c.want {
			t.Errorf("sourceOf(%s) = %v %v, want %s", c.addr, got, ok, c.want)
		}
	}
	if got, ok := sourceOf(&net.UnixAddr{Name: "/run/example.sock", Net: "unix"}); ok {
		t.Errorf("sourceOf(a Unix socket) = %v, want none", got)
	}
}

// An Accept waiting at max for a place returns net.ErrClosed and no
// connection once the listener is closed, and the newcomer is closed.
func TestAcceptWaitingClosed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 1, 1)
	defer l.Close()
	url := "http://" + l.Addr().String()
	dialRaw(t, url)
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	l.ConnState(first, http.StateActive) // busy: never displaced
	newcomer := dialRaw(t, url)
	type accepted struct {
		c   net.Conn
		err error
	}
	done := make(chan accepted)
	go func() {
		c, err := l.Accept()
		done <- accepted{c, err}
	}()
	waitFor(t, "Accept to wait for a place", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.waiting })
	l.Close()
	got := <-done
	if got.c != nil || !errors.Is(got.err, net.ErrClosed) {
		t.Errorf("Accept after Close = %#v, %v; want nil, net.ErrClosed", got.c, got.err)
	}
	if !newcomer.closedWithin(5 * time.Second) {
		t.Error("the newcomer is still open")
	}
	checkStats(t, l, 1, 0, 0)
}
