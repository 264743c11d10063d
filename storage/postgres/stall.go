package postgres

import (
	"net"
	"strconv"
	"syscall"
	"time"
)

// Bounds a stalled connection's keepalives: the first probe after the
// stall timeout of silence, then one every third of it, and the
// connection given up after keepaliveCount unanswered; whole seconds,
// at least one (the kernel's unit).
const keepaliveCount = 3

func wholeSeconds(d time.Duration) int64 { return max(1, int64((d+time.Second-1)/time.Second)) }

func wholeMillis(d time.Duration) int64 { return max(1, d.Milliseconds()) }

// stallParams are the server settings Options.StallTimeout sets on every
// connection, as startup parameters (see the package doc, "Stalls").
func stallParams(stall time.Duration) map[string]string {
	return map[string]string{
		"idle_in_transaction_session_timeout": strconv.FormatInt(wholeMillis(stall), 10),
		"lock_timeout":                        strconv.FormatInt(wholeMillis(stall), 10),
		"tcp_keepalives_idle":                 strconv.FormatInt(wholeSeconds(stall), 10),
		"tcp_keepalives_interval":             strconv.FormatInt(wholeSeconds(stall/3), 10),
		"tcp_keepalives_count":                strconv.Itoa(keepaliveCount),
		"tcp_user_timeout":                    strconv.FormatInt(wholeMillis(2*stall), 10),
	}
}

// stallDialer dials the store's connections with the same keepalives as
// the server's end (stallParams) and, on Linux, TCP_USER_TIMEOUT: a
// connection whose peer stopped answering fails here too, instead of
// waiting for the operating system's defaults (hours).
func stallDialer(stall time.Duration) *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     time.Duration(wholeSeconds(stall)) * time.Second,
			Interval: time.Duration(wholeSeconds(stall/3)) * time.Second,
			Count:    keepaliveCount,
		},
		Control: func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket has no TCP options
			}
			return setUserTimeout(c, 2*stall)
		},
	}
}
