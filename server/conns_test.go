package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/connlimit"
	"github.com/decisionledger/ledger/server/approverpage"
	"github.com/decisionledger/ledger/verify"
)

// newTestHTTP makes an unstarted test server for s as ledgerd serves it
// with cfg (NewHTTPServer: deadlines, connection cap, error log). wrap,
// if set, wraps the loopback listener beneath the cap.
func newTestHTTP(t testing.TB, cfg *config.Config, s *Server, wrap func(net.Listener) net.Listener) *httptest.Server {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	ln := hs.Listener
	if wrap != nil {
		ln = wrap(ln)
	}
	maxConns, perSource, err := cfg.ConnectionCaps()
	if err != nil {
		t.Fatal(err)
	}
	idle, _ := cfg.IdleTimeoutDuration()
	write, _ := cfg.WriteTimeoutDuration()
	srv, limited := NewHTTPServer(s.Handler(), ln, HTTPOptions{MaxConnections: maxConns, MaxConnectionsPerSource: perSource,
		IdleTimeout: idle, WriteTimeout: write, Logger: s.log, Metrics: s.m})
	hs.Config, hs.Listener = srv, limited
	return hs
}

// serveHTTP serves s on a loopback port as ledgerd does with cfg.
func serveHTTP(t testing.TB, cfg *config.Config, s *Server) *httptest.Server {
	t.Helper()
	hs := newTestHTTP(t, cfg, s, nil)
	hs.Start()
	t.Cleanup(hs.Close)
	return hs
}

// rawConn is a client connection written and read by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
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

// A keep-alive connection is closed after idle_timeout.
func TestIdleConnectionClosed(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.IdleTimeout = "300ms" })
	c := dialRaw(t, s.url)
	c.send(t, apitest.Healthz)
	if resp, _, err := c.response(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	if !c.closedWithin(10 * time.Second) {
		t.Fatal("an idle keep-alive connection is still open 10 s after idle_timeout (300ms)")
	}
}

// An append whose body stops coming is refused with 408 body_timeout
// after body_timeout, and its connection closed.
func TestSlowBodyTimeout(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.BodyTimeout = "300ms" })
	c := dialRaw(t, s.url)
	c.send(t, apitest.PartialAppend("Bearer "+s.token))
	resp, body, err := c.response(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to a partial body 10 s after body_timeout (300ms): %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"body_timeout"`) {
		t.Fatalf("got %d %s, want 408 body_timeout", resp.StatusCode, body)
	}
	if !c.closedWithin(10 * time.Second) {
		t.Fatal("the connection stays open after the body timed out")
	}
	if s.l.Size() != 0 {
		t.Fatal("appended")
	}
}

// A body declared (Content-Length) larger than max_body_bytes is refused
// at once with 413 too_large, on every endpoint that takes a mediator's
// body, without waiting for the body (the client sends only the header)
// nor reading it, and the connection is closed; nothing is recorded. A
// body of exactly max_body_bytes is read.
func TestDeclaredBodyTooLarge(t *testing.T) {
	const maxBody = 4096
	s := startMedServer(t, func(c *config.Config) {
		c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies
		c.MaxBodyBytes = maxBody
		c.BodyTimeout = "60s" // not what answers
	})
	size := s.l.Size()
	id := "sha256:" + strings.Repeat("1", 64)
	header := func(path, length string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + s.token +
			"\r\nContent-Type: application/json\r\nContent-Length: " + length + "\r\n\r\n"
	}
	for _, path := range []string{"/v1/entries", "/v1/decide", "/v1/approvals/" + id + "/consume", "/v1/approvals/" + id + "/outcome"} {
		for _, length := range []string{"10000000000", fmt.Sprint(maxBody + 1)} {
			c := dialRaw(t, s.url)
			c.send(t, header(path, length))
			resp, body, err := c.response(10 * time.Second)
			if err != nil {
				t.Fatalf("%s, Content-Length %s: no answer within 10 s (body_timeout 60s): %v", path, length, err)
			}
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close || !strings.Contains(body, `"too_large"`) {
				t.Fatalf("%s, Content-Length %s: got %d (Connection: %q) %s, want 413 too_large, Connection: close", path, length, resp.StatusCode, resp.Header.Get("Connection"), body)
			}
			if !c.closedWithin(5 * time.Second) {
				t.Fatalf("%s, Content-Length %s: the connection stays open after the refusal", path, length)
			}
		}
	}
	// The approver's page's forms too, against their own bound.
	for _, length := range []string{"10000000000", fmt.Sprint(approverpage.MaxForm + 1)} {
		c := dialRaw(t, s.url)
		c.send(t, "POST /approvals/sign-in HTTP/1.1\r\nHost: example.com\r\nOrigin: http://example.com\r\nAccept: application/json\r\n"+
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "+length+"\r\n\r\n")
		resp, body, err := c.response(10 * time.Second)
		if err != nil {
			t.Fatalf("/approvals/sign-in, Content-Length %s: no answer within 10 s: %v", length, err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close || !strings.Contains(body, `"too_large"`) {
			t.Fatalf("/approvals/sign-in, Content-Length %s: got %d (Connection: %q) %s, want 413 too_large, Connection: close", length, resp.StatusCode, resp.Header.Get("Connection"), body)
		}
		if !c.closedWithin(5 * time.Second) {
			t.Fatalf("/approvals/sign-in, Content-Length %s: the connection stays open after the refusal", length)
		}
	}
	c := dialRaw(t, s.url)
	c.send(t, header("/v1/entries", fmt.Sprint(maxBody))+strings.Repeat(" ", maxBody))
	if resp, body, err := c.response(10 * time.Second); err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_request"`) {
		t.Fatalf("a body of max_body_bytes, all spaces: %v %v %s, want 400 invalid_request", resp, err, body)
	}
	if s.l.Size() != size {
		t.Fatal("appended")
	}
}

// An append without a valid bearer token is answered at once, without
// waiting for its body, and its connection is closed.
func TestUnauthenticatedAppendNotRead(t *testing.T) {
	s := startServer(t) // body_timeout 30 s: it is not what closes these
	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", 64), s.token, "Basic " + s.token} {
		c := dialRaw(t, s.url)
		c.send(t, apitest.PartialAppend(auth))
		resp, body, err := c.response(5 * time.Second)
		if err != nil {
			t.Fatalf("%q: no answer before the body is complete: %v", auth, err)
		}
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close || !strings.Contains(body, `"unauthenticated"`) {
			t.Fatalf("%q: got %d (Connection: %q) %s, want 401 unauthenticated, Connection: close", auth, resp.StatusCode, resp.Header.Get("Connection"), body)
		}
		if !c.closedWithin(5 * time.Second) {
			t.Fatalf("%q: the connection stays open after the refusal", auth)
		}
	}
}

// The listener's counts (package connlimit) are ledgerd's metrics: a
// source's second connection, at max_connections_per_source 1, takes the
// place of its first, which has sent nothing.
func TestConnectionMetrics(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.MaxConnections, c.MaxConnectionsPerSource = 3, 1 })
	addr := strings.TrimPrefix(s.url, "http://")
	var silent []*rawConn
	for range 2 {
		c, err := dialFrom("127.0.0.1", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		silent = append(silent, &rawConn{c, bufio.NewReader(c)})
	}
	if !silent[0].closedWithin(5 * time.Second) {
		t.Fatal("the source's first connection was not closed for its second")
	}
	c, err := dialFrom("127.0.0.2", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := &rawConn{c, bufio.NewReader(c)}
	m.send(t, "GET /metrics HTTP/1.1\r\nHost: example.com\r\n\r\n")
	_, metrics, err := m.response(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ledgerd_connections_open 2\n", "ledgerd_connections_reclaimed_total 1\n", "ledgerd_connections_refused_total 0\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// smallBuffers sets small socket buffers on accepted connections, so that
// a response cannot sit in the kernel while the write deadline passes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// An export that takes the client longer than write_timeout to read, at a
// steady pace, is not cut off: the deadline applies to each 64 KiB.
func TestExportOutlastsWriteTimeout(t *testing.T) {
	s := startServer(t)
	const n = 64 // entries of some 16 KiB: 1 MiB
	for i := range n {
		body := strings.Replace(apitest.AppendBody(i), `"payee_known":true`, `"memo":"`+strings.Repeat("m", 16<<10)+`"`, 1)
		if _, err := s.l.Append(context.Background(), apitest.Record(t, body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	const writeTimeout = 500 * time.Millisecond
	cfg := *s.cfg
	cfg.WriteTimeout = writeTimeout.String()
	hs := newTestHTTP(t, &cfg, newServer(t, &cfg, s.l, slog.New(slog.DiscardHandler), nil), func(ln net.Listener) net.Listener { return smallBuffers{ln} })
	hs.Start()
	defer hs.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(conn, "GET /v1/export?start=0&end=%d HTTP/1.1\r\nHost: example.com\r\n\r\n", n)
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(slowReader{conn}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	key, _ := verify.ParseKey(s.key.VerifierKey())
	report, err := verify.VerifyExport(resp.Body, key, verify.ExportOptions{})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("an export read over %v, with write_timeout %v, is cut off: %v", elapsed, writeTimeout, err)
	}
	if elapsed < 2*writeTimeout {
		t.Fatalf("the client read the export in %v, too fast to test a write timeout of %v", elapsed, writeTimeout)
	}
	if report.End != n {
		t.Fatalf("export of %d entries", report.End)
	}
}

// slowReader reads at most 8 KiB every 10 ms: under 1 MB/s.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 8<<10)])
}

// net/http's own messages are JSON log records too.
func TestServerErrorLogJSON(t *testing.T) {
	s := startServer(t)
	logs := &apitest.LockedBuffer{}
	srv := newServer(t, s.cfg, s.l, slog.New(slog.NewJSONHandler(logs, nil)), nil)
	hs := newTestHTTP(t, s.cfg, srv, nil)
	hs.StartTLS()
	defer hs.Close()
	c := dialRaw(t, hs.URL[len("https://"):])
	c.send(t, apitest.Healthz) // plain HTTP to a TLS server: a failed handshake
	c.closedWithin(5 * time.Second)
	apitest.WaitFor(t, "the handshake error to be logged", func() bool { return strings.Contains(logs.String(), "TLS handshake error") })
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg, Error string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if strings.Contains(rec.Error, "TLS handshake error") && (rec.Level != "WARN" || rec.Msg != "http server") {
			t.Errorf("handshake error logged as %+v", rec)
		}
	}
}

// Shutdown ends a connection that never sent a byte at once: net/http
// alone takes a new connection for idle only after five seconds, so a
// browser's preconnection held every ledgerd stop that long.
func TestShutdownClosesSilentConnections(t *testing.T) {
	s := startServerWith(t, nil)
	hs := newTestHTTP(t, s.cfg, s.srv, nil)
	hs.Start()
	t.Cleanup(hs.Close)
	silent := dialRaw(t, hs.URL)
	limited := hs.Listener.(*connlimit.Listener)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if open, _, _ := limited.Stats(); open == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection was not accepted in 30 s")
		}
	}
	// Five seconds is net/http's wait; well under it, the shutdown must
	// be done.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := hs.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a silent connection open: %v", err)
	}
	if !silent.closedWithin(time.Second) {
		t.Fatal("the silent connection is still open after Shutdown")
	}
}
