package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/connlimit"
)

// Floods of connections that send nothing. Each test opens a bounded
// number of them as fast as it can (so that they wait in the listen queue
// ahead of the client's), then asks from another source. The bounds
// asserted are far from what the mechanism gives on any machine: a slot
// taken by a silent connection is freed at once (one source at its cap)
// or after 250 ms (at max_connections), where it took 2 s before; a wave
// of displacements is paced by that grace, not by the CPU.

// floodConns are connections that send nothing, held until the server
// closes them or the test ends.
type floodConns struct {
	closed atomic.Int64 // by the server
}

// openSilent opens n connections to addr, the i-th from the source
// address src(i), that send nothing.
func openSilent(t *testing.T, addr string, n int, src func(i int) string) *floodConns {
	t.Helper()
	f := &floodConns{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i := range n {
		c, err := dialFrom(src(i), addr)
		if err != nil {
			t.Fatalf("silent connection %d: %v", i, err)
		}
		go func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
			defer stop()
			if _, err := io.Copy(io.Discard, c); !isTimeout(err) {
				f.closed.Add(1)
			}
		}()
	}
	return f
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialFrom connects to addr from the loopback address src (any 127.x.y.z
// is the machine's own).
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// clientFrom is an HTTP client whose connections come from src, each
// request on a new one, with a timeout.
func clientFrom(src string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// askUnderFlood makes n requests for /healthz from src, each of which
// must be answered within limit.
func askUnderFlood(t *testing.T, url, src string, n int, limit time.Duration, flood string) {
	t.Helper()
	client := clientFrom(src, limit)
	for i := range n {
		start := time.Now()
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			t.Fatalf("request %d from %s, after %s: no answer within %v: %v", i, src, flood, limit, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d from %s, after %s: %s", i, src, flood, resp.Status)
		}
		t.Logf("request %d answered in %v", i, time.Since(start).Round(time.Millisecond))
	}
}

// 600 silent connections from one source, at max_connections 64: the
// source may hold 32 of them (max_connections_per_source's default, half),
// each newcomer from it taking the place of its oldest at once, so that a
// client of another source is served as soon as its connection comes out
// of the listen queue. (Each of the 64 slots freed once every 2 s, the
// queue would have taken some 17 s to drain.)
func TestConnectionFloodFromOneSource(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.MaxConnections = 64 })
	addr := strings.TrimPrefix(s.url, "http://")
	const n, perSource = 600, 32
	f := openSilent(t, addr, n, func(int) string { return "127.0.0.1" })
	askUnderFlood(t, s.url, "127.0.0.2", 5, 5*time.Second, "600 silent connections from 127.0.0.1")
	// The client's connection was queued behind the flood's: they were
	// all accepted before it, and all but the source's last 32 closed.
	apitest.WaitFor(t, fmt.Sprintf("%d silent connections to be closed", n-perSource), func() bool { return f.closed.Load() >= n-perSource })
	if got := f.closed.Load(); got > n-perSource {
		t.Errorf("%d of the source's %d connections were closed, want %d: it may hold %d", got, n, n-perSource, perSource)
	}
	// A client of the flooding source is served too: its connection
	// takes the place of one of the source's silent ones.
	askUnderFlood(t, s.url, "127.0.0.1", 5, 5*time.Second, "600 silent connections from 127.0.0.1")
}

// 400 silent connections from 40 sources (10 each: no source at its
// cap), at max_connections 64: each slot is freed 250 ms after its silent
// connection came, so the listen queue drains in about 1.3 s, and the
// client waits that long at most. (Freed every 2 s, the queue would have
// taken some 10.5 s.)
func TestConnectionFloodFromManySources(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.MaxConnections = 64 })
	addr := strings.TrimPrefix(s.url, "http://")
	start := time.Now()
	openSilent(t, addr, 400, func(i int) string { return fmt.Sprintf("127.0.1.%d", 1+i%40) })
	askUnderFlood(t, s.url, "127.0.0.2", 1, 6*time.Second, "400 silent connections from 40 sources")
	if d := time.Since(start); d < connlimit.SilentGrace {
		t.Errorf("the client was served %v after the flood began, before any silent connection's grace (%v) ended", d, connlimit.SilentGrace)
	}
	askUnderFlood(t, s.url, "127.0.0.2", 3, 6*time.Second, "400 silent connections from 40 sources")
}
