package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
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
func startInstance(t testing.TB, path string) *instance {
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

// TestShutdown: Shutdown signs a final checkpoint covering every entry
// (none was due: the interval is an hour), closes the store and the
// listener; a reload after it does nothing, and a second Shutdown is
// refused.
func TestShutdown(t *testing.T) {
	path, token := apitest.DataDir(t, t.TempDir())
	setMembers(t, path, map[string]any{"checkpoint_interval": "1h"})
	s := startInstance(t, path)
	for i := range 3 {
		if code := apitest.AppendWith(t, s.url, token, i); code != http.StatusCreated {
			t.Fatalf("append %d: %d", i, code)
		}
	}
	if cp := apitest.Get(t, s.url+"/v1/checkpoint"); strings.Split(cp, "\n")[1] == "3" {
		t.Fatalf("a checkpoint of the 3 entries before the shutdown:\n%s", cp)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if r := apitest.LogRecord(t, s.logs, "ledgerd stopped"); r["size"] != 3.0 || r["checkpoint_size"] != 3.0 {
		t.Errorf("the stop's log line: %v", r)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(t.Context(), cfg, slog.New(slog.DiscardHandler)) // the lock is free
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if st, err := store.Store.State(t.Context()); err != nil || st.Size != 3 || st.CheckpointSize != 3 {
		t.Errorf("the store after the shutdown: %d entries, a checkpoint of %d, %v; want 3 and 3", st.Size, st.CheckpointSize, err)
	}
	if c, err := net.Dial("tcp", s.d.Addr().String()); err == nil {
		c.Close()
		t.Errorf("the listener still takes connections")
	}
	if err := s.d.Reload(t.Context()); err != nil {
		t.Errorf("a reload after the shutdown: %v", err)
	}
	if err := s.d.Shutdown(t.Context()); err == nil {
		t.Error("a second Shutdown succeeded")
	}
}

// setMembers sets members of the config file at path.
func setMembers(t *testing.T, path string, members map[string]any) {
	t.Helper()
	var c map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(c, members)
	b, _ = json.Marshal(c)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
