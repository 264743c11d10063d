// Package daemon runs ledgerd inside its caller's process: from a loaded
// config and an open listener to an orderly shutdown, everything the
// ledgerd binary does between the two.
//
// Start opens the store the config names (badger in store_dir, or a
// PostgreSQL database), the ledger on it (which checks the log, repairs
// what a crash left and refuses a log its keys do not sign), the action
// catalog and the policy set (archived and published before the first
// decision), the approvals' state (its deadlines published before the
// first approval), the witnesses, the preview sweeps, the socket of
// "ledgerd fsck --online" (fsck.sock in store_dir), and the HTTP API
// (package server) behind the config's connection caps, timeouts and TLS.
// With the store a postgres:// URL the daemon is one instance of several
// on that database: it follows, forwarding what it does not serve itself,
// until it takes the lease and sequences.
//
// Reload reads the config file again and puts its credentials and TLS
// certificate in force, then the policy directory (docs/config.md
// "Reload"). Shutdown finishes the requests in flight, signs a final
// checkpoint, releases the lease on PostgreSQL and closes the store.
//
// The daemon logs to its Options.Logger and never writes to stdout or
// installs a signal handler: its caller (cmd/ledgerd) prints what a
// person reads, catches SIGTERM for Shutdown and SIGHUP for Reload, and
// makes the process's exit status. Start's errors are those of the step
// that failed, unwrapped but for OpenError, which says that the store or
// the log refused to open (ledger.ErrCorrupt, ledger.ErrRotation), so
// that the caller can say what to do.
//
// A run from a temporary directory is ExampleStart.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/witness"
)

// Options are the arguments of Start.
type Options struct {
	// Config is the configuration, loaded and checked (config.Load).
	// Required. Its Listen is not listened on (Listener is), but it is
	// logged, and a cluster's instance derives its advertise URL from it
	// (config.Config.AdvertiseURL).
	Config *config.Config
	// ConfigPath is the file Reload reads again. Empty: Reload refuses.
	ConfigPath string
	// FileConfig is the config as the file said at start, before the
	// caller changed it (ledgerd's --listen): Reload names the members
	// that changed since and need a restart. Nil: Config.
	FileConfig *config.Config
	// Files are the signing key, the catalog and the policy set. Nil:
	// Start loads them (LoadFiles).
	Files *Files
	// Listener is where the API serves. Required; Shutdown closes it.
	Listener net.Listener
	// Logger receives every log line. Nil: none are written.
	Logger *slog.Logger
}

// Files are what a start reads beside the config: ledgerd reads them
// before it listens, so that a broken file fails the start before the
// port is taken.
type Files struct {
	Key      *ledger.Key
	Catalog  catalog.Catalog // nil without catalog_dir
	Policies *policy.Set     // nil without policy_dir
}

// LoadFiles reads cfg's key_file, catalog_dir and policy_dir. A policy
// set that does not load is named with policy_dir and file:line:col.
func LoadFiles(cfg *config.Config) (*Files, error) {
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		return nil, err
	}
	f := &Files{Key: key}
	if cfg.CatalogDir != "" {
		if f.Catalog, err = catalog.Load(cfg.CatalogDir); err != nil {
			return nil, err
		}
	}
	if cfg.PolicyDir != "" {
		if f.Policies, err = policy.Load(cfg.PolicyDir, f.Catalog.Declarations()); err != nil {
			return nil, fmt.Errorf("policy_dir %s: %w", cfg.PolicyDir, err)
		}
	}
	return f, nil
}

// OpenError is a start refused by the store or by the log on it: the
// store did not open (Ledger false), or the ledger did not (true), for
// damage (ledger.ErrCorrupt), keys that do not sign the log
// (ledger.ErrRotation) or any other reason. Its message is Err's.
type OpenError struct {
	Ledger bool
	Err    error
}

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// A Daemon is ledgerd running, from Start until Shutdown.
type Daemon struct {
	cfg  *config.Config
	log  *slog.Logger
	key  *ledger.Key
	tls  bool
	addr net.Addr
	srv  *http.Server
	ln   net.Listener

	// ctx is the background work's (witnesses, sweeps, online fsck), and
	// cancel ends it at Shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup
	// done is closed when serving stopped by itself.
	done chan struct{}

	// reloadMu makes reloads one at a time, and Shutdown wait for the
	// one running; stopped is set at Shutdown.
	reloadMu   sync.Mutex
	stopped    bool
	configPath string
	reload     func(context.Context) error
	// stop is the rest of Shutdown, once serving has stopped.
	stop func(ctx context.Context) error
	// node is the cluster's instance, nil for a single ledgerd.
	node *node
}

// Start starts ledgerd as opts says and returns once it serves on
// opts.Listener. ctx bounds the start (opening a large store may take
// minutes); once started, the daemon runs until Shutdown. A start that
// fails closes what it opened, but not the listener.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	cfg := opts.Config
	if cfg == nil || opts.Listener == nil {
		return nil, errors.New("daemon: Options.Config and Options.Listener are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	files := opts.Files
	if files == nil {
		var err error
		if files, err = LoadFiles(cfg); err != nil {
			return nil, err
		}
	}
	fileCfg := opts.FileConfig
	if fileCfg == nil {
		fileCfg = cfg
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &Daemon{cfg: cfg, log: log, key: files.Key, tls: cfg.TLS != nil, ctx: runCtx, cancel: cancel, done: make(chan struct{}),
		configPath: opts.ConfigPath}
	reloader := &configReloader{path: opts.ConfigPath, start: fileCfg, log: log}
	start := d.startSingle
	if cfg.Store != "" {
		start = d.startCluster
	}
	if err := start(ctx, files, reloader, opts.Listener); err != nil {
		cancel()
		return nil, err
	}
	return d, nil
}

// startSingle starts a single ledgerd, on its badger store.
func (d *Daemon) startSingle(ctx context.Context, files *Files, reloader *configReloader, ln net.Listener) (err error) {
	cfg, log, key, cat, set := d.cfg, d.log, files.Key, files.Catalog, files.Policies
	interval, _ := cfg.CheckpointIntervalDuration()
	commitInterval, _ := cfg.MinCommitIntervalDuration()
	store, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return &OpenError{Err: err}
	}
	m := metrics.New()
	l, err := ledger.Open(ctx, store.Store, key, ledger.Options{
		CheckpointInterval: interval, MinCommitInterval: commitInterval, Logger: log, OnBatch: m.ObserveBatch,
		PreviousKeys: cfg.PreviousKeys,
	})
	if err != nil {
		store.Close()
		return &OpenError{Ledger: true, Err: err}
	}
	var stopFsck func()
	defer func() {
		if err != nil {
			d.cancel()
			d.loops.Wait()
			if stopFsck != nil {
				stopFsck()
			}
			l.Close()
			store.Close()
		}
	}()
	pol := policies.New(cfg.PolicyDir, cfg.StoreDir, cat, l, log, m)
	if set != nil {
		// Archived and published (unless it was the latest publication)
		// before the first decision.
		if err := pol.Start(ctx, set); err != nil {
			return err
		}
	}
	var appr *approvals.State
	if cfg.Approvals != nil {
		if appr, err = newApprovals(cfg, nil); err != nil {
			return err
		}
		// The deadlines in force before the first approval is opened.
		if err := appr.PublishConfig(ctx, l, log); err != nil {
			return err
		}
	}
	creds := server.NewCredentials(cfg)
	reloader.creds, reloader.m = creds, m
	// ledgerd fsck --online asks this process to check the log
	// (fsck.go); without the socket the rest works.
	if stopFsck, err = serveFsck(d.ctx, cfg.StoreDir, l, log); err != nil {
		log.Warn("online fsck unavailable", "error", err)
		stopFsck, err = nil, nil
	}
	var wit *witness.Set
	if len(cfg.Witnesses) > 0 {
		if wit, err = newWitnesses(ctx, cfg, l, storedCosignatures(cfg, l), log); err != nil {
			return err
		}
	}
	opts := serverOptions(cfg, log, m, creds)
	opts.Ledger, opts.Catalog, opts.Policies, opts.Approvals, opts.Witnesses = l, cat, pol, appr, wit
	api, err := server.New(opts)
	if err != nil {
		return err
	}
	srv, limited, err := newHTTPServer(cfg, log, m, api.Handler(), ln)
	if err != nil {
		return err
	}
	if cfg.TLS != nil {
		if srv.TLSConfig, reloader.cert, err = serverTLS(cfg.TLS); err != nil {
			return err
		}
	}
	d.srv, d.ln, d.addr = srv, limited, limited.Addr()
	log.Info("ledgerd started", "config", cfg, "catalog", catalogValue(cfg.CatalogDir, cat), "policy_set", pol.CurrentDigest(),
		"version", buildinfo.Read().String(), "go_memory_limit", debug.SetMemoryLimit(-1))
	if wit != nil {
		d.loops.Go(func() { wit.Run(d.ctx) })
	}
	d.serve()
	// The previews of closed and expired approvals are removed at start
	// and every minute.
	if appr != nil {
		d.loops.Go(func() { api.SweepPreviewsEvery(d.ctx, approvals.PreviewSweepInterval) })
	}
	// A reload puts the config's credentials in force, then the policy
	// set. A refused config or set is logged; the credentials and the
	// set in force stay.
	d.reload = func(ctx context.Context) error {
		err := reloader.reload(ctx)
		if cfg.PolicyDir != "" {
			err = errors.Join(err, pol.Reload(ctx))
		}
		return err
	}
	d.stop = func(ctx context.Context) error {
		if stopFsck != nil {
			stopFsck()
		}
		// The ledger signs a final checkpoint.
		if err := l.Close(); err != nil {
			log.Error("ledgerd stopped", "error", err, "size", l.Size())
			store.Close() // logs a full disk itself
			return fmt.Errorf("closing the ledger: %w", err)
		}
		// On a full disk the badger store closes without writing its
		// index, which the next start recovers from the frame log, and
		// says so.
		if err := store.Close(); err != nil {
			log.Error("ledgerd stopped", "error", err, "size", l.Size())
			return fmt.Errorf("closing the store: %w", err)
		}
		_, checkpointSize := l.Checkpoint()
		log.Info("ledgerd stopped", "size", l.Size(), "checkpoint_size", checkpointSize)
		return nil
	}
	return nil
}

// serve serves d.srv on d.ln in the background.
func (d *Daemon) serve() {
	go func() {
		var err error
		if d.tls {
			err = d.srv.ServeTLS(d.ln, "", "")
		} else {
			err = d.srv.Serve(d.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("serving stopped", "error", err)
			close(d.done)
		}
	}()
}

// Addr is the address the API serves on.
func (d *Daemon) Addr() net.Addr { return d.addr }

// URL is the API's base URL: http://Addr, or https:// with TLS.
func (d *Daemon) URL() string {
	if d.tls {
		return "https://" + d.addr.String()
	}
	return "http://" + d.addr.String()
}

// Origin is the log's name, in every checkpoint.
func (d *Daemon) Origin() string { return d.key.Name() }

// VerifierKey is the verifier key of the log's signing key, which checks
// its checkpoints and receipts.
func (d *Daemon) VerifierKey() string { return d.key.VerifierKey() }

// Instance is the instance's name among those on one PostgreSQL
// database (cluster.instance), "" for a single ledgerd.
func (d *Daemon) Instance() string {
	if d.node == nil {
		return ""
	}
	return d.node.instance
}

// AdvertiseURL is the URL the other instances on the database reach this
// one at, "" for a single ledgerd.
func (d *Daemon) AdvertiseURL() string {
	if d.node == nil {
		return ""
	}
	return d.node.advertise
}

// Done is closed when the daemon stopped serving by itself (its listener
// failed, which is logged); the caller then calls Shutdown.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Reload reads the config file again and puts its credentials (mediators,
// readers, approvers) and TLS certificate in force, then reloads the
// policy directory, one reload at a time. A config or a policy set that
// does not load is logged, changes nothing, and is returned. After
// Shutdown it does nothing.
func (d *Daemon) Reload(ctx context.Context) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if d.stopped {
		return nil
	}
	if d.configPath == "" {
		return errors.New("daemon: Options.ConfigPath is empty: no config file to reload")
	}
	return d.reload(ctx)
}

// Shutdown stops the daemon: the background work ends (a reload running
// first), the requests in flight finish within ctx (their entries become
// durable and are acknowledged), then the ledger closes, signing a final
// checkpoint, and the store; an instance on PostgreSQL then releases
// its lease, so that another takes over at once. Its error says what did
// not close; it is logged already.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.reloadMu.Lock()
	if d.stopped {
		d.reloadMu.Unlock()
		return errors.New("daemon: shut down already")
	}
	d.stopped = true
	d.reloadMu.Unlock()
	d.cancel()
	d.loops.Wait()
	if d.node != nil {
		d.node.stopping.Store(true) // it takes no lease any more
	}
	d.srv.Shutdown(ctx)
	return d.stop(ctx)
}

// catalogValue is the catalog in use, for the start's log line: its
// directory and action names, or none.
func catalogValue(dir string, cat catalog.Catalog) slog.Value {
	if cat == nil {
		return slog.StringValue("none: any action, version 1 entries")
	}
	names := make([]string, 0, len(cat))
	for name := range cat {
		names = append(names, name)
	}
	slices.Sort(names)
	return slog.GroupValue(slog.String("dir", dir), slog.Any("actions", names))
}
