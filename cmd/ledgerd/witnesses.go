// Witnesses (docs/operations.md "Witnesses"): package witness submits each
// signed checkpoint to the config's witnesses and keeps the cosignatures
// they return; here the config becomes its options, and its snapshot the
// metrics page's series.

package main

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
	"github.com/prometheus/client_golang/prometheus"
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

// witnessMetrics sends the series of ws's snapshot to ch (the metrics
// page); nothing for a nil ws.
func witnessMetrics(ws *witness.Set) func(chan<- prometheus.Metric) {
	return func(ch chan<- prometheus.Metric) { collectWitnessSnapshot(ch, ws.Snapshot()) }
}

// The witnesses' series (collectWitnessSnapshot).
var (
	witnessesNeededDesc = prometheus.NewDesc("ledgerd_witnesses_needed",
		"Cosignatures a checkpoint should gather (witnesses_needed).", nil, nil)
	checkpointCosignaturesDesc = prometheus.NewDesc("ledgerd_checkpoint_cosignatures",
		"Valid witness cosignatures held for the latest checkpoint.", nil, nil)
	witnessCosignedSizeDesc = prometheus.NewDesc("ledgerd_witness_cosigned_size",
		"The largest tree size of this log each witness cosigned, as far as ledgerd knows (0 until it cosigns).", []string{"witness"}, nil)
	witnessLagDesc = prometheus.NewDesc("ledgerd_witness_lag_entries",
		"Entries the latest checkpoint has beyond the tree the witness last cosigned.", []string{"witness"}, nil)
	witnessFailuresDesc = prometheus.NewDesc("ledgerd_witness_failures_total",
		"Failed submissions to each witness, by kind.", []string{"witness", "kind"}, nil)
	witnessLastSuccessDesc = prometheus.NewDesc("ledgerd_witness_last_success_timestamp_seconds",
		"When each witness last returned a valid cosignature (Unix time; 0: never since the start).", []string{"witness"}, nil)

	witnessDescs = []*prometheus.Desc{witnessesNeededDesc, checkpointCosignaturesDesc, witnessCosignedSizeDesc,
		witnessLagDesc, witnessFailuresDesc, witnessLastSuccessDesc}
)

// collectWitnessSnapshot sends the witnesses' series of s to ch; nothing
// without witnesses.
func collectWitnessSnapshot(ch chan<- prometheus.Metric, s witness.Snapshot) {
	if len(s.Witnesses) == 0 {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(witnessesNeededDesc, float64(s.Needed))
	gauge(checkpointCosignaturesDesc, float64(s.Held))
	for _, w := range s.Witnesses {
		gauge(witnessCosignedSizeDesc, float64(w.Cosigned), w.Name)
		gauge(witnessLagDesc, float64(w.Lag), w.Name)
	}
	if s.Following {
		// A follower submits nothing: it has no failures nor successes.
		return
	}
	for _, w := range s.Witnesses {
		for _, k := range witness.FailureKinds() {
			ch <- prometheus.MustNewConstMetric(witnessFailuresDesc, prometheus.CounterValue, float64(w.Failures[k]), w.Name, k)
		}
		var t float64
		if !w.LastSuccess.IsZero() {
			t = float64(w.LastSuccess.UnixMilli()) / 1000
		}
		gauge(witnessLastSuccessDesc, t, w.Name)
	}
}
