package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The gateway keeps its connections to ledgerd and to an upstream server
// open across calls, also when many are in flight: rounds of 16
// concurrent calls open about as many connections as the first round
// needs, not a connection per call beyond the second (the default
// transport's two idle connections per host).
func TestGatewayKeepAlive(t *testing.T) {
	t.Parallel()
	up, upConns := startEcho(t)
	catalog, policies := echoCatalog(t, toolPins(t, up.URL))
	l := startLedger(t, catalog, policies)
	proxied := *l
	var ledgerConns *atomic.Int64
	proxied.url, ledgerConns = countingProxy(t, strings.TrimPrefix(l.url, "http://"))
	cfg, token := writeGatewayConfig(t, &proxied, catalog, map[string]any{"bench": map[string]any{"url": up.URL}}, nil)
	g := startGateway(t, cfg, token)
	agent := g.agentAt(t, "", nil)
	before := l.appends(t)

	const inFlight, rounds = 16, 5
	for range rounds {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if text, isErr := callText(t, agent, "bench.echo", echoArgs); isErr {
					t.Errorf("call refused or failed: %s", text)
				}
			}()
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}
	// Each call appends a decision and, after its answer, an outcome.
	waitFor(t, "the outcomes", func() bool { return l.appends(t) >= before+2*inFlight*rounds })
	// At most inFlight decisions and the outcome workers' appends are in
	// flight at once; twice inFlight leaves room for a connection lost.
	if n := ledgerConns.Load(); n > 2*inFlight {
		t.Errorf("the gateway opened %d connections to ledgerd for %d calls in rounds of %d", n, inFlight*rounds, inFlight)
	}
	if n := upConns.Load(); n > 2*inFlight {
		t.Errorf("the gateway opened %d connections to the upstream server for %d calls in rounds of %d", n, inFlight*rounds, inFlight)
	}
	t.Logf("connections: %d to ledgerd, %d to the upstream server", ledgerConns.Load(), upConns.Load())
}

// countingProxy forwards the connections it accepts on a loopback port
// to target (host:port) and counts them; it returns its URL.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				s, err := net.DialTimeout("tcp", target, 10*time.Second)
				if err != nil {
					return
				}
				defer s.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(s, c); done <- struct{}{} }()
				go func() { io.Copy(c, s); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String(), n
}
