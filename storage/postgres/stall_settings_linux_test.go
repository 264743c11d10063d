package postgres_test

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestStallSettings: with StallTimeout, every connection of the pool has
// the server-side bounds of a stall (idle_in_transaction_session_timeout,
// lock_timeout, the TCP keepalives and tcp_user_timeout, set at
// startup), and over TCP this side's socket has keepalives and
// TCP_USER_TIMEOUT too. (The test server listens on a Unix socket, where
// the server ignores its TCP settings; the proxy gives this side a TCP
// connection.)
func TestStallSettings(t *testing.T) {
	srv := pgtest.Shared(t)
	url := srv.NewDatabase(t)
	proxy := srv.NewProxy(t)
	s, err := postgres.Open(t.Context(), proxy.URL(url), postgres.Options{MaxConns: 3, StallTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	want := map[string]string{
		"idle_in_transaction_session_timeout": "4000",
		"lock_timeout":                        "4000",
		"tcp_keepalives_idle":                 "4",
		"tcp_keepalives_interval":             "2",
		"tcp_keepalives_count":                "3",
		"tcp_user_timeout":                    "8000",
		"standard_conforming_strings":         "on",
		"client_encoding":                     "UTF8",
	}
	for i, c := range postgres.AcquireAll(t, s) {
		for name, v := range want {
			var got, source string
			err := c.QueryRow(t.Context(), "SELECT reset_val, source FROM pg_settings WHERE name = $1", name).Scan(&got, &source)
			if err != nil {
				t.Fatal(err)
			}
			if got != v || source != "client" {
				t.Errorf("connection %d: %s = %s (source %s), want %s set by the client", i, name, got, source, v)
			}
		}
		tc, ok := c.PgConn().Conn().(*net.TCPConn)
		if !ok {
			t.Fatalf("connection %d is a %T, not TCP", i, c.PgConn().Conn())
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		opts := map[string][2]int{
			"SO_KEEPALIVE":     {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			"TCP_KEEPIDLE":     {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"TCP_KEEPINTVL":    {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			"TCP_KEEPCNT":      {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			"TCP_USER_TIMEOUT": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
		}
		wantOpt := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 4, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": 8000}
		for name, o := range opts {
			var v int
			var gerr error
			if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), o[0], o[1]) }); err != nil || gerr != nil {
				t.Fatalf("getsockopt %s: %v %v", name, err, gerr)
			}
			if v != wantOpt[name] {
				t.Errorf("connection %d: %s = %d, want %d", i, name, v, wantOpt[name])
			}
		}
	}
}
