package daemon

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// instance is a daemon a test started from a config file, as ledgerd
// serve starts one: the files loaded, a listener on the config's listen,
// Start, its log in logs.
type instance struct {
	d    *Daemon
	url  string
	logs *apitest.LockedBuffer
	stop func() error // shuts it down, once, and returns Shutdown's error
}

// startInstance starts an instance from the config file at path, or
// fails the test; the test's end shuts it down.
func startInstance(t *testing.T, path string) *instance {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	logs := &apitest.LockedBuffer{}
	d, err := Start(t.Context(), Options{Config: cfg, ConfigPath: path, Listener: ln, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		ln.Close()
		t.Fatalf("the daemon did not start: %v\n%s", err, logs)
	}
	s := &instance{d: d, url: d.URL(), logs: logs}
	var once sync.Once
	var serr error
	s.stop = func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			serr = d.Shutdown(ctx)
		})
		return serr
	}
	t.Cleanup(func() { s.stop() })
	return s
}
