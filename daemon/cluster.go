// Several ledgerd instances on one PostgreSQL database (docs/operations.md
// "Several instances on PostgreSQL"): exactly one, the holder of the
// database's lease, sequences; the others follow.
//
// Each instance runs one loop (node.run), every sixth of the lease's TTL:
//
//   - Following, it reads who holds the lease (CurrentLease) and tries to
//     take it (AcquireLease, which refuses a lease another holds and has
//     not let expire by the database's clock). Meanwhile it serves the
//     log's reads from a ledger.Follow view over its own store, and
//     forwards every other request (appends, decisions, approvals, the
//     approver's page, the policy archive) to the holder's advertise URL,
//     adding "Ledger-Forwarded-By: <instance>".
//   - On taking the lease it opens a fresh store for its term (every
//     Commit and AddCheckpoint through it is conditional on the new
//     epoch), opens the ledger on it (the default open, whose cost does
//     not grow with the log: the follower view checked the log already,
//     and the approval state starts from the database's approval
//     snapshot), makes a single ledgerd's start-time
//     publications (the policy set, the approval deadlines), starts the
//     witnesses, and only then switches the HTTP handler to the
//     sequencing routes.
//   - Sequencing, it renews the lease every third of the TTL. When the
//     renewal says the lease is lost, when it has not succeeded for a
//     whole TTL (the database is unreachable, and another instance may
//     take over once it returns), or when the ledger reports a storage
//     failure (a fenced commit, the database gone), it steps down: the
//     handler goes back to following first (new requests are forwarded,
//     or answered 503), then the ledger is closed (queued appends are
//     refused with errors, never acknowledged; a batch in the store's
//     hands is committed or fenced, and answered so), the lease released
//     if it is still ours, and the term's store closed. The loop then
//     follows again, and takes the lease again when it can: the instance
//     recovers by itself when the database returns.
//
// An append is acknowledged only by the sequencer's ledger, once durable;
// a follower relays the sequencer's answer, and when it gets none it
// answers 503 outcome_unknown (the append may have been made: a retry with
// the same Idempotency-Key learns its receipt, as the keys are unique in
// the database). It gets none when the connection breaks, when no answer
// begins within forwardTimeout, and when it learns that the lease moved
// before the answer began: the forward is abandoned then, as the instance
// it went to (frozen, cut off) no longer sequences. A request that arrives
// forwarded at an instance that does not sequence is answered 503 and
// never forwarded again.

package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/storage/postgres"
	"github.com/decisionledger/ledger/witness"
	"github.com/prometheus/client_golang/prometheus"
)

// forwardedByHeader names the instance that forwarded a request.
const forwardedByHeader = "Ledger-Forwarded-By"

// The roles, as /readyz and the metrics name them.
const (
	roleSequencer = "sequencer"
	roleFollower  = "follower"
)

// Step-down reasons, in the log and the metrics' reason label.
const (
	reasonLeaseLost      = "lease_lost"        // another instance took the lease
	reasonNotRenewed     = "lease_not_renewed" // no renewal for a whole TTL
	reasonStorageFailure = "storage_failure"   // the ledger stopped appends
)

// node is one instance of a cluster.
type node struct {
	cfg       *config.Config
	key       *ledger.Key
	cat       catalog.Catalog
	set       *policy.Set // loaded at start; a takeover loads policy_dir again
	log       *slog.Logger
	m         *metrics.Series
	instance  string
	advertise string
	ttl       time.Duration

	// creds are the credentials in force, the follower's and every
	// term's; reloader puts the config file's in force on SIGHUP.
	creds    *server.Credentials
	reloader *configReloader

	// handler serves every request now: the follower's or the term's.
	handler atomic.Pointer[http.Handler]
	// follower is the read-only view of the log and its routes: its
	// archive of policy sets, and its witnesses (nil without).
	followStore *postgres.Store
	followL     *ledger.Ledger
	followPol   *policies.Archive
	followWit   *witness.Set
	followH     http.Handler
	// stopWitnesses ends the follower's cosignature loop, and
	// witnessesDone is done once it has.
	stopWitnesses context.CancelFunc
	witnessesDone sync.WaitGroup
	proxy         *httputil.ReverseProxy
	// reads caches the entries and full tiles clients read, for the
	// follower's view and every term (readcache.go).
	reads *readCache

	// term is the sequencing term, nil while following. Only the loop
	// (and, after it, shutdown) changes it.
	term atomic.Pointer[term]
	// candidate is the store the next term would use, opened while
	// following; only the loop touches it.
	candidate *postgres.Store
	// dbLogged is when the loop last logged a database error (logDB).
	dbLogged time.Time
	// closing counts the closes of former terms still running.
	closing sync.WaitGroup
	// stopping is set at shutdown: the instance takes no lease then.
	stopping atomic.Bool

	mu   sync.Mutex
	view leaseView
	// leaseCtx ends, with the cause errLeaseMoved, when the lease's epoch
	// moves past view's (another instance, or this one, took it): the
	// forwards sent to the former holder are abandoned then. Guarded by
	// mu, as view.
	leaseCtx   context.Context
	leaseMoved context.CancelCauseFunc
	// forwardTimeout is how long a forward waits for the sequencer's
	// answer (its header) once the request is sent.
	forwardTimeout time.Duration

	takeovers, forwarded, forwardFailures atomic.Uint64
	stepdowns                             sync.Map // reason → *atomic.Uint64
}

// leaseView is what a follower knows of the lease, from CurrentLease.
type leaseView struct {
	lease postgres.Lease
	read  time.Time // when lease was read
	live  bool      // held, by an instance with an address
	dbErr error     // the last CurrentLease's error, nil once it succeeds
}

// term is one period of sequencing.
type term struct {
	store *postgres.Store
	l     *ledger.Ledger
	pol   *policies.Archive
	wit   *witness.Set // nil without witnesses
	api   *server.Server
	// handler is api's, which serves while the term sequences.
	handler http.Handler
	epoch   uint64
	// renewed is when the last successful renewal (or the acquisition)
	// began: by the database's clock the lease holds until lease_ttl
	// after some later moment. The loop sets it; /readyz reads it.
	renewed atomic.Pointer[time.Time]
	cancel  context.CancelFunc
	done    sync.WaitGroup // witnesses and preview sweeps
}

func (t *term) setRenewed(at time.Time) { t.renewed.Store(&at) }

func (t *term) lastRenewed() time.Time { return *t.renewed.Load() }

// startCluster starts one instance among several on cfg.Store's
// database, serving on ln. It fails the start only when the database
// cannot be reached or read at all, or the log does not open with the
// config's keys: once it serves, it rides out the database's outages.
func (d *Daemon) startCluster(ctx context.Context, files *Files, reloader *configReloader, ln net.Listener) (err error) {
	cfg, log, key, cat, set := d.cfg, d.log, files.Key, files.Catalog, files.Policies
	n, err := newNode(ctx, cfg, key, cat, set, ln, log)
	if err != nil {
		return err
	}
	reloader.creds, reloader.m = n.creds, n.m
	n.reloader = reloader
	closeFollower := func() {
		n.stopFollowing()
		n.followL.Close()
		n.followStore.Close()
	}
	defer func() {
		if err != nil {
			closeFollower()
		}
	}()
	if set != nil {
		// The follower's archive holds the set it would put in force,
		// so that its exports carry the bundle.
		if err := n.followPol.Store(set); err != nil {
			return err
		}
	}
	body, _ := cfg.BodyTimeoutDuration()
	srv, limited, err := newHTTPServer(cfg, log, n.m, server.BodyDeadline(body, http.HandlerFunc(n.serveHTTP)), ln)
	if err != nil {
		return err
	}
	if cfg.TLS != nil {
		if srv.TLSConfig, n.reloader.cert, err = serverTLS(cfg.TLS); err != nil {
			return err
		}
	}
	d.srv, d.ln, d.addr, d.node = srv, limited, limited.Addr(), n
	log.Info("ledgerd started", "config", cfg, "catalog", catalogValue(cfg.CatalogDir, cat), "instance", n.instance,
		"advertise_url", n.advertise, "lease_ttl", n.ttl.String(), "size", n.followL.Size(),
		"version", buildinfo.Read().String(), "go_memory_limit", debug.SetMemoryLimit(-1))
	d.serve()
	// The loop outlives the background work: a sequencer renews its
	// lease while the requests in flight finish.
	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		n.run(loopCtx)
	}()
	d.reload = n.reload
	d.stop = func(shutdown context.Context) error {
		// No request is taken any more, and those in flight have
		// finished (their entries durable and acknowledged, or
		// refused): the term is closed, the ledger signing a final
		// checkpoint, and the lease released so that another instance
		// takes over at once.
		defer closeFollower()
		stopLoop()
		<-loopDone
		var err error
		if t := n.term.Load(); t != nil {
			if err = n.endTerm(shutdown, t, true); err != nil {
				log.Error("ledgerd stopped", "error", err, "size", t.l.Size())
				err = fmt.Errorf("closing the ledger: %w", err)
			} else {
				_, cpSize := t.l.Checkpoint()
				log.Info("ledgerd stopped", "instance", n.instance, "role", roleSequencer, "size", t.l.Size(), "checkpoint_size", cpSize)
			}
		} else {
			log.Info("ledgerd stopped", "instance", n.instance, "role", roleFollower, "size", n.followL.Size())
		}
		if n.candidate != nil {
			n.candidate.Close()
		}
		// A former term's close may wait on a database that does not
		// answer: it gets what is left of the shutdown's time.
		closed := make(chan struct{})
		go func() {
			n.closing.Wait()
			close(closed)
		}()
		select {
		case <-closed:
		case <-shutdown.Done():
			log.Warn("a former term's ledger did not close in time (a commit waits for the database); exiting", "instance", n.instance)
		}
		return err
	}
	return nil
}

// newNode opens the follower's store and view, and makes the instance's
// handlers; the instance follows until its loop takes the lease.
func newNode(ctx context.Context, cfg *config.Config, key *ledger.Key, cat catalog.Catalog, set *policy.Set, ln net.Listener, log *slog.Logger) (*node, error) {
	ttl, err := cfg.Cluster.LeaseTTLDuration()
	if err != nil {
		return nil, err
	}
	advertise, err := cfg.AdvertiseURL(ln.Addr())
	if err != nil {
		return nil, err
	}
	checkpointInterval, err := cfg.CheckpointIntervalDuration()
	if err != nil {
		return nil, err
	}
	n := &node{cfg: cfg, key: key, cat: cat, set: set, log: log, m: metrics.New(),
		instance: cfg.Instance(), advertise: advertise, ttl: ttl, forwardTimeout: forwardTimeout(ttl, checkpointInterval),
		reads: newReadCache(readCacheBytes)}
	n.leaseCtx, n.leaseMoved = context.WithCancelCause(context.Background())
	n.m.SetLog(n.size, n.checkpointTime)
	n.m.MustRegister((*clusterSeries)(n))
	if n.followStore, err = openPostgres(ctx, cfg); err != nil {
		return nil, err
	}
	if n.followL, err = ledger.Follow(ctx, &cachingStore{n.followStore, n.reads}, key, ledger.Options{Logger: log, PreviousKeys: cfg.PreviousKeys}); err != nil {
		n.followStore.Close()
		return nil, fmt.Errorf("following the log on %s: %w", postgres.RedactURL(cfg.Store), err)
	}
	n.proxy, err = n.newProxy()
	if err != nil {
		n.followL.Close()
		n.followStore.Close()
		return nil, err
	}
	n.creds = server.NewCredentials(cfg)
	n.followPol = policies.New("", cfg.StoreDir, nil, n.followL, log, n.m)
	wctx, stop := context.WithCancel(context.Background())
	n.stopWitnesses = stop
	if len(cfg.Witnesses) > 0 {
		// The cosignatures the sequencers kept in the database, verified
		// and served by this instance while it follows.
		if n.followWit, err = newFollowerWitnesses(ctx, cfg, n.followL, n.followStore, log); err != nil {
			n.followL.Close()
			n.followStore.Close()
			return nil, err
		}
		n.witnessesDone.Go(func() { n.followWit.Follow(wctx, func() bool { return n.term.Load() != nil }) })
		n.m.SetWitnesses(n.witnessSnapshot)
	}
	opts := serverOptions(cfg, log, n.m, n.creds)
	opts.Ledger, opts.Catalog, opts.Policies, opts.Witnesses = n.followL, cat, n.followPol, n.followWit
	opts.Cluster, opts.Ready, opts.Forward, opts.Local = true, n.ready, n.forward, followerLocal(cfg.TilesPrefix)
	follower, err := server.New(opts)
	if err != nil {
		n.followL.Close()
		n.followStore.Close()
		return nil, err
	}
	n.followH = follower.Handler()
	n.handler.Store(&n.followH)
	n.observe(ctx)
	return n, nil
}

// stopFollowing ends the follower's cosignature loop.
func (n *node) stopFollowing() {
	n.stopWitnesses()
	n.witnessesDone.Wait()
}

// witnessSnapshot is the witnesses' state of the instance's role now,
// for the metrics: the sequencer's submissions, or what the follower
// serves.
func (n *node) witnessSnapshot() witness.Snapshot {
	if t := n.term.Load(); t != nil {
		return t.wit.Snapshot()
	}
	return n.followWit.Snapshot()
}

// serveHTTP serves r with the handler of the instance's role now. The
// log's reads may be answered from the instance's cache (readcache.go).
func (n *node) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		r = r.WithContext(withCachedReads(r.Context()))
	}
	(*n.handler.Load()).ServeHTTP(w, r)
}

// size and checkpointTime are the metrics' view of the log: the
// sequencer's ledger, or the follower's.
func (n *node) size() uint64 {
	if t := n.term.Load(); t != nil {
		return t.l.Size()
	}
	return n.followL.Size()
}

func (n *node) checkpointTime() time.Time {
	if t := n.term.Load(); t != nil {
		return t.l.CheckpointTime()
	}
	return n.followL.CheckpointTime()
}

// run is the instance's loop, until ctx ends (the term, if any, is then
// left to serveCluster's shutdown).
func (n *node) run(ctx context.Context) {
	tick := time.NewTicker(n.ttl / 6)
	defer tick.Stop()
	for {
		if n.term.Load() == nil {
			n.observe(ctx)
			n.tryTakeOver(ctx)
		} else {
			n.sequence(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// observe reads who holds the lease, for forwarding and /readyz: a
// holder is live while its lease is held by the database's clock
// (Lease.Held), and it has an address (a command's lease, check or key
// rotate, has none).
func (n *node) observe(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, n.ttl/2)
	defer cancel()
	lease, err := n.followStore.CurrentLease(qctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	v := &n.view
	if err != nil {
		if v.dbErr == nil && ctx.Err() == nil {
			n.log.Warn("reading the lease failed; retrying", "instance", n.instance, "error", err)
		}
		// What was read last stands for at most a TTL.
		v.dbErr = err
		v.live = v.live && time.Since(v.read) < n.ttl
		return
	}
	if v.dbErr != nil {
		n.log.Info("reading the lease again", "instance", n.instance)
	}
	n.noteEpoch(lease.Epoch)
	v.dbErr, v.lease, v.read = nil, lease, time.Now()
	// This instance's own name while it follows is a lease from before
	// a restart, held until it expires: nobody to forward to.
	v.live = lease.Held && lease.Address != "" && !(lease.Holder == n.instance && n.term.Load() == nil)
}

// noteEpoch abandons the forwards in flight if epoch is not the epoch
// of the lease they were sent under (n.view's): the lease moved, and the
// instance they were sent to no longer sequences. The caller holds n.mu.
func (n *node) noteEpoch(epoch uint64) {
	if epoch == n.view.lease.Epoch {
		return
	}
	n.leaseMoved(errLeaseMoved)
	n.leaseCtx, n.leaseMoved = context.WithCancelCause(context.Background())
}

// tryTakeOver takes the lease if it is free or expired, and then starts
// a term.
func (n *node) tryTakeOver(ctx context.Context) {
	if ctx.Err() != nil || n.stopping.Load() {
		return
	}
	if n.candidate == nil {
		s, err := openPostgres(ctx, n.cfg)
		if err != nil {
			n.logDB("opening the store failed; retrying", err)
			return
		}
		n.candidate = s
	}
	// The lease runs from some moment of AcquireLease's round trip by
	// the database's clock: from its start, at the latest, by ours.
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, n.ttl/2)
	lease, err := n.candidate.AcquireLease(actx, n.instance, n.advertise, n.ttl)
	cancel()
	switch {
	case errors.Is(err, postgres.ErrLeaseHeld):
		return
	case err != nil:
		n.logDB("taking the lease failed; retrying", err)
		// The store may be broken: the next attempt opens a fresh one.
		n.candidate.Close()
		n.candidate = nil
		return
	}
	store := n.candidate
	n.candidate = nil
	// The lease is this instance's: the forwards to the former holder
	// are abandoned, and new ones answered 503 until the term serves.
	n.mu.Lock()
	n.noteEpoch(lease.Epoch)
	n.view = leaseView{lease: lease, read: start}
	n.mu.Unlock()
	t, err := n.startTerm(ctx, store, lease)
	if err != nil {
		n.log.Error("taking over failed; following", "instance", n.instance, "epoch", lease.Epoch, "error", err)
		rctx, cancel := context.WithTimeout(context.Background(), n.ttl/2)
		store.ReleaseLease(rctx)
		cancel()
		store.Close()
		return
	}
	t.setRenewed(start)
	n.takeovers.Add(1)
	n.term.Store(t)
	n.handler.Store(&t.handler)
	n.log.Info("became the sequencer", "instance", n.instance, "epoch", lease.Epoch, "advertise_url", n.advertise,
		"size", t.l.Size())
}

// logDB logs a database error of the loop, at most every 10 s.
func (n *node) logDB(msg string, err error) {
	if now := time.Now(); now.Sub(n.dbLogged) >= 10*time.Second {
		n.dbLogged = now
		n.log.Warn(msg, "instance", n.instance, "error", err)
	}
}

// startTerm opens the ledger on store, whose lease this instance holds,
// and makes the start-time publications of a single ledgerd.
func (n *node) startTerm(ctx context.Context, store *postgres.Store, lease postgres.Lease) (*term, error) {
	cfg, log := n.cfg, n.log
	interval, _ := cfg.CheckpointIntervalDuration()
	commitInterval, _ := cfg.MinCommitIntervalDuration()
	l, err := ledger.Open(ctx, &cachingStore{store, n.reads}, n.key, ledger.Options{
		CheckpointInterval: interval, MinCommitInterval: commitInterval, Logger: log, OnBatch: n.m.ObserveBatch,
		PreviousKeys: cfg.PreviousKeys,
	})
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.Background())
	t := &term{store: store, l: l, epoch: lease.Epoch, cancel: cancel}
	fail := func(err error) (*term, error) {
		cancel()
		t.done.Wait()
		l.Close()
		return nil, err
	}
	pol := policies.New(cfg.PolicyDir, cfg.StoreDir, n.cat, l, log, n.m)
	if set := n.policySet(ctx); set != nil {
		if err := pol.Start(ctx, set); err != nil {
			return fail(err)
		}
	}
	t.pol = pol
	var appr *approvals.State
	if cfg.Approvals != nil {
		if appr, err = newApprovals(cfg, store); err != nil {
			return fail(err)
		}
		if err := appr.PublishConfig(ctx, l, log); err != nil {
			return fail(err)
		}
	}
	if len(cfg.Witnesses) > 0 {
		if t.wit, err = newWitnesses(ctx, cfg, l, store, log); err != nil {
			return fail(err)
		}
	}
	opts := serverOptions(cfg, log, n.m, n.creds)
	opts.Ledger, opts.Catalog, opts.Policies, opts.Approvals, opts.Witnesses = l, n.cat, pol, appr, t.wit
	opts.Cluster, opts.Ready = true, n.ready
	api, err := server.New(opts)
	if err != nil {
		return fail(err)
	}
	if appr != nil {
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			api.SweepPreviewsEvery(tctx, approvals.PreviewSweepInterval)
		}()
	}
	if t.wit != nil {
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			t.wit.Run(tctx)
		}()
	}
	t.api, t.handler = api, api.Handler()
	return t, nil
}

// policySet is the set a new term puts in force: policy_dir as it is now,
// or, if it does not load, the set loaded at start.
func (n *node) policySet(ctx context.Context) *policy.Set {
	if n.cfg.PolicyDir == "" {
		return nil
	}
	set, err := policy.Load(n.cfg.PolicyDir, n.cat.Declarations())
	if err != nil {
		n.log.ErrorContext(ctx, "policy_dir does not load; the set loaded at start goes in force", "error", err)
		return n.set
	}
	return set
}

// sequence is the loop's step while this instance sequences: step down
// after a storage failure, renew the lease every third of its TTL, and
// step down when it is lost or has not been renewed for a whole TTL.
func (n *node) sequence(ctx context.Context) {
	t := n.term.Load()
	if err := t.l.Failure(); err != nil {
		n.stepDown(t, reasonStorageFailure, err)
		return
	}
	if ctx.Err() != nil || time.Since(t.lastRenewed()) < n.ttl/3-n.ttl/12 {
		return
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, n.ttl/3)
	lease, err := t.store.RenewLease(rctx, n.ttl)
	cancel()
	switch {
	case err == nil:
		t.setRenewed(start)
		n.mu.Lock()
		n.view = leaseView{lease: lease, read: start, live: true}
		n.mu.Unlock()
	case errors.Is(err, postgres.ErrLeaseLost):
		n.stepDown(t, reasonLeaseLost, err)
	case ctx.Err() != nil:
	case time.Since(t.lastRenewed()) >= n.ttl:
		n.stepDown(t, reasonNotRenewed, err)
	default:
		n.log.Warn("renewing the lease failed; retrying", "instance", n.instance, "epoch", t.epoch, "error", err)
	}
}

// stepDown ends term t: the handler follows first, so that no new
// request reaches t's ledger; then the term is closed in the background
// (a commit in the store's hands may wait for an unreachable database)
// while the loop follows again.
func (n *node) stepDown(t *term, reason string, cause error) {
	n.handler.Store(&n.followH)
	n.term.Store(nil)
	n.mu.Lock()
	n.view.live = false
	n.mu.Unlock()
	c, _ := n.stepdowns.LoadOrStore(reason, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
	n.log.Warn("stepped down; following", "instance", n.instance, "epoch", t.epoch, "reason", reason, "error", cause)
	n.closing.Add(1)
	go func() {
		defer n.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
		defer cancel()
		if err := n.endTerm(ctx, t, reason != reasonLeaseLost); err != nil {
			n.log.Info("the former term's ledger closed", "instance", n.instance, "epoch", t.epoch, "error", err)
		}
	}()
}

// endTerm closes term t: its witnesses and sweeps, its ledger (queued
// appends refused, the batch being stored finished, a final checkpoint
// signed if the store still takes it), the lease if release, and its
// store.
func (n *node) endTerm(ctx context.Context, t *term, release bool) error {
	t.cancel()
	t.done.Wait()
	err := t.l.Close()
	if release {
		if rerr := t.store.ReleaseLease(ctx); rerr != nil && !errors.Is(rerr, postgres.ErrLeaseLost) {
			n.log.Warn("releasing the lease failed; it expires by itself", "instance", n.instance, "epoch", t.epoch, "error", rerr)
		}
	}
	t.store.Close()
	return err
}

// reload is Daemon.Reload (ledgerd's SIGHUP): every instance puts its
// config file's credentials in force (reload.go), for itself and for the
// terms it sequences later. Then the sequencer reloads, archives and
// publishes policy_dir; a follower only checks it (a set that does not
// load is logged), and puts it in force when it takes over.
func (n *node) reload(ctx context.Context) error {
	var err error
	if n.reloader != nil {
		err = n.reloader.reload(ctx)
	}
	if n.cfg.PolicyDir == "" {
		return err // the config's reload was all
	}
	if t := n.term.Load(); t != nil {
		return errors.Join(err, t.pol.Reload(ctx))
	}
	set, perr := policy.Load(n.cfg.PolicyDir, n.cat.Declarations())
	if perr != nil {
		n.m.PolicyReload(false)
		n.log.ErrorContext(ctx, "policy reload refused", "error", perr)
		return errors.Join(err, perr)
	}
	if perr := n.followPol.Store(set); perr != nil {
		n.m.PolicyReload(false)
		n.log.ErrorContext(ctx, "policy reload: archiving failed", "error", perr)
		return errors.Join(err, perr)
	}
	n.m.PolicyReload(true)
	n.log.InfoContext(ctx, "policy reload: this instance follows; the set goes in force when it sequences",
		"instance", n.instance, "policy_set", set.Digest().String())
	return err
}

// followerLocal are the route patterns (server.RoutePatterns) a follower
// serves itself: the log's reads, which its view answers from the
// database (with witnesses, with the cosignatures the sequencers kept
// there, verified), and health, readiness and metrics. Every other route
// is forwarded (server.Options.Forward).
func followerLocal(tilesPrefix string) []string {
	tiles := strings.TrimSuffix(tilesPrefix, "/")
	return []string{"GET /v1/entries/{index}", "GET /v1/inclusion", "GET /v1/consistency",
		"GET /v1/actions", "GET /v1/actions/{action}",
		"GET /v1/checkpoint", "GET /v1/checkpoints/{size}", "GET /v1/export", "GET /v1/proofs/{index}",
		"GET /healthz", "GET /readyz", "GET /metrics", "GET " + tiles + "/checkpoint", "GET " + tiles + "/tile/{path...}"}
}

// errLeaseMoved is the cause of a forward's abandon: the lease moved
// while the sequencer had not answered.
var errLeaseMoved = errors.New("the lease moved to another term")

// forwardTimeout is how long a follower waits for the sequencer's answer
// to a forwarded request once it is sent: longer than a sequencer that
// holds its lease takes to answer (a commit, which the lease bounds, after
// at most min_commit_interval's largest value; for ?wait=checkpoint, a
// checkpoint_interval more), and short enough that a sequencer that holds
// its lease but answers nothing does not hold the request forever.
func forwardTimeout(ttl, checkpointInterval time.Duration) time.Duration {
	return 2*ttl + checkpointInterval + time.Second
}

// newProxy makes the forwarding proxy: to the sequencer's advertise URL,
// keeping the client's Host (so that the approver's page checks origins
// as behind any proxy), with forwardedByHeader set; a request whose
// answer does not begin within n.forwardTimeout of being sent is
// abandoned (forwardFailed).
func (n *node) newProxy() (*httputil.ReverseProxy, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// A forward holds one connection to the sequencer, and a follower
	// has at most max_connections requests in flight, one per client's
	// connection: it keeps as many idle, so that a load that needed them
	// reuses them rather than dialing and closing one a forward
	// (net/http's defaults keep 2, and 100 in all). They exist only once
	// a load needed them, and close after IdleConnTimeout; the sequencer
	// closes idle ones itself when its own max_connections needs room.
	// No MaxConnsPerHost: a forward waiting for a connection would wait
	// with no bound but the client's, before forwardTimeout begins.
	maxConns, _, err := n.cfg.ConnectionCaps()
	if err != nil {
		return nil, err
	}
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = maxConns, maxConns
	// The sequencer closes a connection idle for idle_timeout (the
	// instances share their config): closed here first, an idle
	// connection is never taken for a forward just as the sequencer
	// closes it.
	if idle, err := n.cfg.IdleTimeoutDuration(); err == nil {
		tr.IdleConnTimeout = idle / 2
	}
	tr.ResponseHeaderTimeout = n.forwardTimeout
	if n.cfg.TLS != nil {
		// The sequencer's certificate is checked against the system's
		// roots; with mutual TLS this instance presents its own.
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if n.cfg.TLS.ClientCAFile != "" {
			cert, err := tls.LoadX509KeyPair(n.cfg.TLS.CertFile, n.cfg.TLS.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls: %w", err)
			}
			// The server's certificate in force, which a reload
			// renews, once serving has begun.
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if r := n.reloader; r != nil && r.cert != nil {
					return r.cert.current(), nil
				}
				return &cert, nil
			}
		}
		tr.TLSClientConfig = tc
	}
	return &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			fw := pr.In.Context().Value(forwardKey{}).(*forwarding)
			pr.SetURL(fw.target)
			if fw.body != nil {
				// The proxy wraps the body it forwards, which hides
				// from the Transport that it is in memory. The body in
				// hand, the follower does not ask the sequencer for a
				// 100 Continue before sending it (its client had it
				// from the follower): that would cost a round trip.
				pr.Out.Body = io.NopCloser(bytes.NewReader(fw.body))
				pr.Out.Header.Del("Expect")
			}
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedByHeader, n.instance)
		},
		// Once the sequencer's answer has begun, it is relayed whole,
		// wherever the lease goes: the outcome is known.
		ModifyResponse: func(resp *http.Response) error {
			if !resp.Request.Context().Value(forwardKey{}).(*forwarding).keep() {
				return errLeaseMoved // abandoned just before
			}
			return nil
		},
		ErrorHandler: n.forwardFailed,
		ErrorLog:     server.ErrorLog(n.log),
		// The answer is copied with a pooled buffer; without one each
		// forward would allocate 32 KiB (nearly half of what a forward
		// allocated, by BenchmarkClusterAppend's profile).
		BufferPool: proxyBuffers{},
	}, nil
}

// proxyBuffers are the forwarding proxy's copy buffers, reused across
// forwards (httputil.BufferPool).
type proxyBuffers struct{}

var proxyBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (proxyBuffers) Get() []byte { return *proxyBufferPool.Get().(*[]byte) }

func (proxyBuffers) Put(b []byte) { proxyBufferPool.Put(&b) }

// forwarding is a forward in flight, in its request's context.
type forwarding struct {
	target *url.URL
	// body is the request's body, when the follower read it whole
	// (readForwardBody).
	body []byte
	// keep stops the forward's abandon should the lease move, and
	// reports whether it was not abandoned already.
	keep func() bool
}

type forwardKey struct{}

// forward sends r to the sequencer and relays its answer, or answers 503
// with Retry-After when there is none to send it to.
func (n *node) forward(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(forwardedByHeader); by != "" {
		n.forwardFailures.Add(1)
		w.Header().Set("Retry-After", "1")
		server.WriteError(w, http.StatusServiceUnavailable, "no_sequencer", "this instance does not sequence the log now; a forwarded request is never forwarded again: retry")
		return
	}
	n.mu.Lock()
	v, moved := n.view, n.leaseCtx
	n.mu.Unlock()
	if !v.live {
		n.forwardFailures.Add(1)
		if v.dbErr != nil {
			w.Header().Set("Retry-After", "1")
			server.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the database is unreachable: no instance is known to sequence the log; retry")
		} else {
			w.Header().Set("Retry-After", "1")
			server.WriteError(w, http.StatusServiceUnavailable, "no_sequencer", "no instance sequences the log now; retry")
		}
		return
	}
	target, err := url.Parse(v.lease.Address)
	if err != nil {
		n.forwardFailures.Add(1)
		w.Header().Set("Retry-After", "1")
		server.WriteError(w, http.StatusServiceUnavailable, "no_sequencer", "the sequencer's address is not a URL; retry")
		return
	}
	body, ok := n.readForwardBody(w, r)
	if !ok {
		return
	}
	n.forwarded.Add(1)
	// The forward is abandoned if the lease moves before the answer
	// begins: the instance it went to (frozen, cut off) no longer
	// sequences, and the request, retried, reaches the one that does.
	// Nothing else abandons it once sent, not even the client's
	// connection: net/http cancels a request's context when its client
	// half-closes after the body, or when a streamed body's read deadline
	// passes after it was read, and a forward abandoned then would leave
	// a client still reading an empty 200 for an append the sequencer may
	// have made. forwardTimeout bounds the wait for the answer, and a
	// client truly gone makes the answer's write fail.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	keep := context.AfterFunc(moved, func() { cancel(errLeaseMoved) })
	defer keep()
	n.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, forwardKey{}, &forwarding{target: target, body: body, keep: keep})))
}

// forwardBodyMax is the largest request body a follower reads whole
// before it forwards the request (readForwardBody): an append's, a
// decision's, an approver's form are far smaller. Larger ones, and those
// of unknown length, are streamed to the sequencer as they arrive (which
// refuses what exceeds its max_body_bytes). It bounds what a forward in
// flight holds, and so what max_connections forwards hold at once.
const forwardBodyMax = 64 << 10

// readForwardBody reads r's body whole, if its length is known and at
// most forwardBodyMax, before anything is sent to the sequencer, and
// returns it (nil for a body left to stream). Forwarded from memory, the
// request's header and body go in one write (a body the Transport has to
// read it writes after flushing the header, a second write, which the
// sequencer may well read separately), copied with no 32 KiB buffer of
// the Transport's own. The body in, the connection's read deadline
// (BodyDeadline's) goes, as for an append the sequencer reads itself:
// left, net/http's background read would cancel the forward once it
// passed. A body that does not arrive is answered as the sequencer
// answers one, 408 body_timeout or 400 unreadable, and nothing is
// forwarded. ok reports whether the request is to be forwarded.
func (n *node) readForwardBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if r.ContentLength <= 0 || r.ContentLength > forwardBodyMax {
		return nil, true
	}
	body = make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			timeout, _ := n.cfg.BodyTimeoutDuration()
			w.Header().Set("Connection", "close")
			server.WriteError(w, http.StatusRequestTimeout, "body_timeout", "the body did not arrive within %v", timeout)
		} else {
			server.WriteError(w, http.StatusBadRequest, "unreadable", "the body could not be read")
		}
		return nil, false
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, true
}

// forwardFailed answers a request the sequencer did not answer: 503
// no_sequencer when it could not be reached (nothing was sent), else 503
// outcome_unknown (the request was sent, and may or may not have been
// carried out): no answer within n.forwardTimeout, the forward abandoned
// as the lease moved, or the connection lost.
func (n *node) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	n.forwardFailures.Add(1)
	moved := errors.Is(err, errLeaseMoved) || errors.Is(context.Cause(r.Context()), errLeaseMoved)
	var op *net.OpError
	if !moved && errors.As(err, &op) && op.Op == "dial" {
		w.Header().Set("Retry-After", "1")
		server.WriteError(w, http.StatusServiceUnavailable, "no_sequencer", "the sequencer could not be reached; retry")
		return
	}
	const retry = "the request may or may not have been carried out: retry it with the same Idempotency-Key (carried out at most once, it answers with the first receipt)"
	var ne net.Error
	w.Header().Set("Retry-After", "1")
	switch {
	case moved:
		n.log.WarnContext(r.Context(), "forward abandoned: the lease moved before the sequencer answered", "instance", n.instance)
		server.WriteError(w, http.StatusServiceUnavailable, "outcome_unknown", "another instance took over before the sequencer answered; %s", retry)
	case errors.As(err, &ne) && ne.Timeout():
		n.log.WarnContext(r.Context(), "forward abandoned: the sequencer did not answer in time", "instance", n.instance, "timeout", n.forwardTimeout.String())
		server.WriteError(w, http.StatusServiceUnavailable, "outcome_unknown", "the sequencer did not answer within %v; %s", n.forwardTimeout, retry)
	default:
		n.log.WarnContext(r.Context(), "forwarding to the sequencer failed", "instance", n.instance, "error", err)
		server.WriteError(w, http.StatusServiceUnavailable, "outcome_unknown", "the sequencer did not answer; %s", retry)
	}
}

// readiness is the body of GET /readyz on an instance of a cluster.
type readiness struct {
	Ready     bool   `json:"ready"`
	Role      string `json:"role"`
	Instance  string `json:"instance"`
	Sequencer string `json:"sequencer"` // its advertise URL; "" when none is known
	Epoch     uint64 `json:"epoch"`
}

// role is this instance's role at now, and its term, if it has one:
// roleSequencer while it has a term whose lease holds by the local
// clock, that is, while less than five sixths of the lease's TTL have
// passed since the start of the last successful renewal. Past that the
// lease may have expired by the database's clock and another instance
// may sequence; the term's loop learns so at its next renewal (after a
// freeze by SIGSTOP, say, some moments after the process resumes), but
// the instance stops calling itself the sequencer at once: roleFollower,
// with its term.
func (n *node) role(now time.Time) (string, *term) {
	t := n.term.Load()
	if t == nil || now.Sub(t.lastRenewed()) >= n.ttl-n.ttl/6 {
		return roleFollower, t
	}
	return roleSequencer, t
}

// ready answers GET /readyz: 200 when this instance can take appends now
// (it sequences, its lease holds by its clock and its ledger has not
// failed, or it follows a live sequencer), 503 otherwise; with
// ?role=sequencer, 200 only on the sequencer.
func (n *node) ready(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	v := n.view
	n.mu.Unlock()
	rd := readiness{Role: roleFollower, Instance: n.instance, Epoch: v.lease.Epoch}
	if v.live {
		rd.Sequencer = v.lease.Address
	}
	switch role, t := n.role(time.Now()); {
	case role == roleSequencer:
		rd.Role, rd.Sequencer, rd.Epoch = roleSequencer, n.advertise, t.epoch
		rd.Ready = t.l.Failure() == nil
	case t != nil:
		// A term whose lease may have expired: who sequences is not
		// known until the loop renews or steps down.
		rd.Sequencer, rd.Epoch = "", t.epoch
	default:
		// A view the store no longer extends (ledger.FollowError) serves
		// stale reads: not ready.
		rd.Ready = v.live && r.URL.Query().Get("role") != roleSequencer && n.followL.Failure() == nil
	}
	w.Header().Set("Content-Type", "application/json")
	if !rd.Ready {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(rd)
}

// The cluster's series (collectMetrics).
var (
	clusterRoleDesc = prometheus.NewDesc("ledgerd_cluster_role",
		"This instance's role: 1 for the role it has.", []string{"instance", "role"}, nil)
	leaseEpochDesc = prometheus.NewDesc("ledgerd_lease_epoch",
		"The lease's epoch: this instance's term while it sequences, else the latest it saw.", nil, nil)
	takeoversDesc = prometheus.NewDesc("ledgerd_takeovers_total",
		"Times this instance took the lease and began to sequence.", nil, nil)
	stepdownsDesc = prometheus.NewDesc("ledgerd_stepdowns_total",
		"Times this instance stopped sequencing, by reason.", []string{"reason"}, nil)
	forwardedDesc = prometheus.NewDesc("ledgerd_forwarded_requests_total",
		"Requests this instance forwarded to the sequencer.", nil, nil)
	forwardingFailuresDesc = prometheus.NewDesc("ledgerd_forwarding_failures_total",
		"Requests to forward answered 503: no sequencer known, none reached, no answer, or forwarded to this instance.", nil, nil)

	clusterDescs = []*prometheus.Desc{clusterRoleDesc, leaseEpochDesc, takeoversDesc, stepdownsDesc,
		forwardedDesc, forwardingFailuresDesc}
)

// clusterSeries collects the cluster's series (collectMetrics) in the
// metrics' registry.
type clusterSeries node

func (*clusterSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterDescs {
		ch <- d
	}
}

func (c *clusterSeries) Collect(ch chan<- prometheus.Metric) { (*node)(c).collectMetrics(ch) }

// collectMetrics sends the cluster's series to ch.
func (n *node) collectMetrics(ch chan<- prometheus.Metric) {
	role, t := n.role(time.Now())
	var epoch uint64
	if t != nil {
		epoch = t.epoch
	} else {
		n.mu.Lock()
		epoch = n.view.lease.Epoch
		n.mu.Unlock()
	}
	for _, r := range []string{roleSequencer, roleFollower} {
		var v float64
		if r == role {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(clusterRoleDesc, prometheus.GaugeValue, v, n.instance, r)
	}
	ch <- prometheus.MustNewConstMetric(leaseEpochDesc, prometheus.GaugeValue, float64(epoch))
	ch <- prometheus.MustNewConstMetric(takeoversDesc, prometheus.CounterValue, float64(n.takeovers.Load()))
	for _, r := range []string{reasonLeaseLost, reasonNotRenewed, reasonStorageFailure} {
		var c uint64
		if v, ok := n.stepdowns.Load(r); ok {
			c = v.(*atomic.Uint64).Load()
		}
		ch <- prometheus.MustNewConstMetric(stepdownsDesc, prometheus.CounterValue, float64(c), r)
	}
	ch <- prometheus.MustNewConstMetric(forwardedDesc, prometheus.CounterValue, float64(n.forwarded.Load()))
	ch <- prometheus.MustNewConstMetric(forwardingFailuresDesc, prometheus.CounterValue, float64(n.forwardFailures.Load()))
}
