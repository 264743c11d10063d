package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A forwarded append reaches the sequencer whole, its header and body
// in one write (the follower reads the body first), without the client's
// Expect: 100-continue (the follower has the body: waiting for the
// sequencer's 100 would cost a round trip); a body that does not arrive
// whole is answered 400 unreadable by the follower without anything
// sent to the sequencer.
func TestClusterForwardBody(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	var mu sync.Mutex
	var bodies, expects []string
	seq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		expects = append(expects, r.Header.Get("Expect"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"recorded":true}`)
	}))
	t.Cleanup(seq.Close)
	if _, err := f.Store(t).AcquireLease(t.Context(), "seq", seq.URL, time.Minute); err != nil {
		t.Fatal(err)
	}
	n, url, _ := testNode(t, f, "b", "3s")
	n.observe(t.Context())
	var writes atomic.Int64
	tr := n.proxy.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}

	for i := range 3 {
		var h map[string]string
		if i == 2 {
			h = map[string]string{"Expect": "100-continue"}
		}
		status, _, body := f.Post(t, url, i, h)
		if status != http.StatusCreated {
			t.Fatalf("append %d through b: %d %s", i, status, body)
		}
	}
	mu.Lock()
	got, expects := append([]string(nil), bodies...), append([]string(nil), expects...)
	mu.Unlock()
	for i, b := range got {
		if b != apitest.AppendBody(i) {
			t.Errorf("the sequencer got body %d %q, want %q", i, b, apitest.AppendBody(i))
		}
	}
	if w := writes.Load(); w != 3 {
		t.Errorf("3 appends forwarded in %d writes, want one each", w)
	}
	if expects[2] != "" {
		t.Errorf("the sequencer got Expect: %s", expects[2])
	}

	// A body cut short: the client sends less than its Content-Length
	// says, and closes its side.
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/entries HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"principal\":", f.Token)
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"unreadable"`) {
		t.Errorf("a body cut short: %d %s, want 400 unreadable", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Errorf("the sequencer got %d requests, want the 3 appends only: %q", len(bodies), bodies[3:])
	}
}

// The forwarding proxy keeps as many idle connections to the sequencer
// as the follower may have requests in flight (max_connections), so
// that a load of more than net/http's default (2 a host, 100 in all)
// does not dial and close a connection a forward; it closes them before
// the sequencer would (idle_timeout); and it copies answers with pooled
// buffers, not 32 KiB allocated a forward.
func TestClusterForwardProxyConfig(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	n, _, _ := testNode(t, f, "b", "3s")
	maxConns, _, err := n.cfg.ConnectionCaps()
	if err != nil {
		t.Fatal(err)
	}
	tr := n.proxy.Transport.(*http.Transport)
	if tr.MaxIdleConnsPerHost != maxConns || tr.MaxIdleConns != maxConns || tr.MaxConnsPerHost != 0 {
		t.Errorf("the proxy keeps %d idle connections a host, %d in all, at most %d a host; want %d, %d, no cap",
			tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tr.MaxConnsPerHost, maxConns, maxConns)
	}
	if idle, _ := n.cfg.IdleTimeoutDuration(); tr.IdleConnTimeout <= 0 || tr.IdleConnTimeout >= idle {
		t.Errorf("the proxy keeps an idle connection %v, want less than idle_timeout %v", tr.IdleConnTimeout, idle)
	}
	if n.proxy.BufferPool == nil {
		t.Error("the proxy has no BufferPool")
	}
	if maxConns < 100 {
		t.Fatalf("max_connections %d: the test needs more than net/http's defaults", maxConns)
	}
}

// A client that half-closes its connection after a whole request still
// gets the sequencer's answer through a follower. net/http cancels the
// request's context at the client's EOF; a forward that followed it
// would be abandoned, and the client, still reading, would get an empty
// 200 for an append the sequencer may have made.
func TestClusterForwardHalfClosed(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	clientGone := make(chan context.Context, 1)
	seq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		// Answer only once the follower's server has seen the client's
		// EOF (and cancelled its request's context).
		<-(<-clientGone).Done()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"recorded":true}`)
	}))
	t.Cleanup(seq.Close)
	if _, err := f.Store(t).AcquireLease(t.Context(), "seq", seq.URL, time.Minute); err != nil {
		t.Fatal(err)
	}
	n, _, _ := testNode(t, f, "b", "3s")
	n.observe(t.Context())
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clientGone <- r.Context()
		n.serveHTTP(w, r)
	}))
	t.Cleanup(follower.Close)

	c, err := net.Dial("tcp", strings.TrimPrefix(follower.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := apitest.AppendBody(0)
	fmt.Fprintf(c, "POST /v1/entries HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		f.Token, len(body), body)
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || string(got) != `{"recorded":true}` {
		t.Errorf("a half-closed client got %d %q, want the sequencer's 201", resp.StatusCode, got)
	}
}
