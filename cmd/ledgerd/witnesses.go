// Witnesses (docs/operations.md "Witnesses"): package witness submits each
// signed checkpoint to the config's witnesses and keeps the cosignatures
// they return; here the config becomes its options, and its snapshot the
// metrics page's series.

package main

import (
	"context"
	"fmt"
	"io"
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

// witnessMetrics writes the series of ws's snapshot (the metrics page);
// nothing for a nil ws.
func witnessMetrics(ws *witness.Set) func(io.Writer) {
	return func(out io.Writer) { writeWitnessSnapshot(out, ws.Snapshot()) }
}

// writeWitnessSnapshot writes the witnesses' series of s; nothing without
// witnesses.
func writeWitnessSnapshot(out io.Writer, s witness.Snapshot) {
	if len(s.Witnesses) == 0 {
		return
	}
	fmt.Fprintf(out, "# HELP ledgerd_witnesses_needed Cosignatures a checkpoint should gather (witnesses_needed).\n# TYPE ledgerd_witnesses_needed gauge\nledgerd_witnesses_needed %d\n", s.Needed)
	fmt.Fprintf(out, "# HELP ledgerd_checkpoint_cosignatures Valid witness cosignatures held for the latest checkpoint.\n# TYPE ledgerd_checkpoint_cosignatures gauge\nledgerd_checkpoint_cosignatures %d\n", s.Held)
	fmt.Fprintf(out, "# HELP ledgerd_witness_cosigned_size The largest tree size of this log each witness cosigned, as far as ledgerd knows (0 until it cosigns).\n# TYPE ledgerd_witness_cosigned_size gauge\n")
	for _, w := range s.Witnesses {
		fmt.Fprintf(out, "ledgerd_witness_cosigned_size{witness=%q} %d\n", w.Name, w.Cosigned)
	}
	fmt.Fprintf(out, "# HELP ledgerd_witness_lag_entries Entries the latest checkpoint has beyond the tree the witness last cosigned.\n# TYPE ledgerd_witness_lag_entries gauge\n")
	for _, w := range s.Witnesses {
		fmt.Fprintf(out, "ledgerd_witness_lag_entries{witness=%q} %d\n", w.Name, w.Lag)
	}
	if s.Following {
		// A follower submits nothing: it has no failures nor successes.
		return
	}
	fmt.Fprintf(out, "# HELP ledgerd_witness_failures_total Failed submissions to each witness, by kind.\n# TYPE ledgerd_witness_failures_total counter\n")
	for _, w := range s.Witnesses {
		for _, k := range witness.FailureKinds() {
			fmt.Fprintf(out, "ledgerd_witness_failures_total{witness=%q,kind=%q} %d\n", w.Name, k, w.Failures[k])
		}
	}
	fmt.Fprintf(out, "# HELP ledgerd_witness_last_success_timestamp_seconds When each witness last returned a valid cosignature (Unix time; 0: never since the start).\n# TYPE ledgerd_witness_last_success_timestamp_seconds gauge\n")
	for _, w := range s.Witnesses {
		var t float64
		if !w.LastSuccess.IsZero() {
			t = float64(w.LastSuccess.UnixMilli()) / 1000
		}
		fmt.Fprintf(out, "ledgerd_witness_last_success_timestamp_seconds{witness=%q} %g\n", w.Name, t)
	}
}
