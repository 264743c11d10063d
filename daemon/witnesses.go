// Witnesses (docs/operations.md "Witnesses"): package witness submits each
// signed checkpoint to the config's witnesses and keeps the cosignatures
// they return; here the config becomes its options (package server
// writes its snapshot's series on the metrics page).

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
	"github.com/decisionledger/ledger/verify"
	"github.com/decisionledger/ledger/witness"
)

// cosignedFileName, in store_dir, holds the latest checkpoint with the
// cosignatures gathered for it (witness.File), so that a restart serves
// them at once.
const cosignedFileName = "cosigned-checkpoint"

// Instances on PostgreSQL keep the cosignatures in the database.
var _ witness.Store = (*postgres.Store)(nil)

// witnessOptions are the options of the config's witnesses (Config.check
// checked them) over l, keeping the cosignatures in store (nil: none).
func witnessOptions(cfg *config.Config, l *ledger.Ledger, store witness.Store, log *slog.Logger) (witness.Options, error) {
	interval, err := cfg.WitnessIntervalDuration()
	if err != nil {
		return witness.Options{}, err
	}
	opts := witness.Options{Log: l, Store: store, Interval: interval, Needed: cfg.WitnessesNeededCount(), Logger: log}
	for i, c := range cfg.Witnesses {
		k, err := verify.ParseWitnessKey(c.Key)
		if err != nil {
			return witness.Options{}, fmt.Errorf("witnesses[%d] (%s): %w", i, c.Name, err)
		}
		opts.Witnesses = append(opts.Witnesses, witness.Witness{Name: c.Name, URL: c.URL, Key: k})
	}
	return opts, nil
}

// newWitnesses sets up the config's witnesses over l and loads the
// cosignatures kept in store (nil: none).
func newWitnesses(ctx context.Context, cfg *config.Config, l *ledger.Ledger, store witness.Store, log *slog.Logger) (*witness.Set, error) {
	opts, err := witnessOptions(cfg, l, store, log)
	if err != nil {
		return nil, err
	}
	return witness.New(ctx, opts)
}

// newFollowerWitnesses is newWitnesses for a follower, which submits
// nothing: it serves the cosignatures store holds (put by the
// sequencer), verified (witness.Set.Follow).
func newFollowerWitnesses(ctx context.Context, cfg *config.Config, l *ledger.Ledger, store witness.Store, log *slog.Logger) (*witness.Set, error) {
	opts, err := witnessOptions(cfg, l, store, log)
	if err != nil {
		return nil, err
	}
	opts.Following = true
	return witness.New(ctx, opts)
}

// storedCosignatures returns the cosignature file of store_dir, or nil
// without one.
func storedCosignatures(cfg *config.Config, l *ledger.Ledger) witness.Store {
	if cfg.StoreDir == "" {
		return nil
	}
	return witness.NewFile(filepath.Join(cfg.StoreDir, cosignedFileName), l.CheckpointAt)
}
