// The store the config names: badger in store_dir (the default), or a
// PostgreSQL database (store). The daemon opens it here, and so do
// ledgerd's commands that read or rewrite the log with ledgerd stopped
// (fsck, key rotate).

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// Store is the configured store, opened: exactly one of Badger and
// Postgres is set, and Store is that same value.
//
// It holds the store, and is not itself a ledger.Store: package ledger
// finds a store's optional interfaces (ledger.SnapshotStore) by type
// assertion, which a wrapper type that embedded the interface would hide
// (it once did, and every start read the whole log). The ledger gets
// Store, the engine's own value; TestOpenedStoreInterfaces checks it has
// each optional interface.
type Store struct {
	Store    ledger.Store
	Badger   *badger.Store
	Postgres *postgres.Store
	// Where is store_dir, or the database's URL redacted, for messages.
	Where string
}

// Close closes the store.
func (o *Store) Close() error { return o.Store.Close() }

// OpenStore opens the store cfg names. A badger store takes its
// directory's lock (one process at a time); a PostgreSQL store is shared,
// and its writers take turns under the lease (cluster.go, Exclusive).
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Store, error) {
	if cfg.Store == "" {
		s, err := badger.Open(ctx, cfg.StoreDir, badger.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return &Store{Store: s, Badger: s, Where: cfg.StoreDir}, nil
	}
	s, err := openPostgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Store{Store: s, Postgres: s, Where: postgres.RedactURL(cfg.Store)}, nil
}

// openPostgres opens the PostgreSQL store of cfg (whose Store is set).
// Its errors show the URL redacted. A transaction of this process that
// stops half-way (the process frozen, its network cut) is aborted by the
// server after the lease's TTL (postgres.Options.StallTimeout): it would
// otherwise hold tree_head's lock, and with it every takeover, for as
// long as the process is stopped.
func openPostgres(ctx context.Context, cfg *config.Config) (*postgres.Store, error) {
	ttl, _ := cfg.Cluster.LeaseTTLDuration()
	return postgres.Open(ctx, cfg.Store, postgres.Options{StallTimeout: ttl})
}

// Exclusive makes the caller, a command that writes or reads the whole
// log (fsck, key rotate), the log's only writer until release: on
// PostgreSQL it takes the sequencer's lease under the name holder, with
// no address (instances started meanwhile answer 503 no_sequencer), and
// renews it in the background; it is refused while an instance holds
// it. release reports a lease lost meanwhile (an instance took it over:
// the command's reading may have raced with its appends). A badger
// store's directory lock already excludes every other process.
func (o *Store) Exclusive(ctx context.Context, cfg *config.Config, holder string) (release func() error, err error) {
	if o.Postgres == nil {
		return func() error { return nil }, nil
	}
	ttl, _ := cfg.Cluster.LeaseTTLDuration()
	if _, err := o.Postgres.AcquireLease(ctx, holder, "", ttl); err != nil {
		if errors.Is(err, postgres.ErrLeaseHeld) {
			cur, _ := o.Postgres.CurrentLease(ctx)
			return nil, fmt.Errorf("instance %q (%s) sequences the log on %s: stop every ledgerd instance on this database first (%w)", cur.Holder, cur.Address, o.Where, err)
		}
		return nil, fmt.Errorf("taking the lease on %s: %w", o.Where, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lost error
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := o.Postgres.RenewLease(ctx, ttl); errors.Is(err, postgres.ErrLeaseLost) {
					lost = err
					return
				}
			}
		}
	}()
	return func() error {
		close(stop)
		wg.Wait()
		if lost != nil {
			return fmt.Errorf("the lease on %s was taken over while %s ran (%w): run it again with every instance stopped", o.Where, holder, lost)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return o.Postgres.ReleaseLease(rctx)
	}, nil
}
