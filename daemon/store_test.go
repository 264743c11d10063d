package daemon

import (
	"context"
	"log/slog"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
)

// TestOpenedStoreInterfaces: the store ledgerd hands to package ledger is
// the engine's own value, with every optional interface the engine
// implements, on both kinds of store. A wrapper that embedded
// ledger.Store once hid ledger.SnapshotStore, and every start read the
// whole log.
func TestOpenedStoreInterfaces(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, o *Store) {
		t.Helper()
		if _, ok := o.Store.(ledger.SnapshotStore); !ok {
			t.Errorf("the %T ledgerd opened is not a ledger.SnapshotStore", o.Store)
		}
	}
	t.Run("badger", func(t *testing.T) {
		o, err := OpenStore(ctx, &config.Config{StoreDir: t.TempDir()}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if o.Store != ledger.Store(o.Badger) {
			t.Errorf("the store is a %T, not the badger store itself", o.Store)
		}
		check(t, o)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		o, err := OpenStore(ctx, &config.Config{Store: url}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if o.Store != ledger.Store(o.Postgres) {
			t.Errorf("the store is a %T, not the PostgreSQL store itself", o.Store)
		}
		check(t, o)
	})
}
