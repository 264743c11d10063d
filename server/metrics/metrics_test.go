package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/witness"
)

// TestWitnessSnapshotText: the series written for a snapshot, a
// sequencer's and a follower's (which has no failures nor successes), are
// these, byte for byte.
func TestWitnessSnapshotText(t *testing.T) {
	failures := func(kv map[string]uint64) map[string]uint64 {
		m := map[string]uint64{}
		for _, k := range witness.FailureKinds() {
			m[k] = kv[k]
		}
		return m
	}
	snap := witness.Snapshot{Needed: 1, Size: 12, Held: 1, Witnesses: []witness.WitnessSnapshot{
		{Name: "w0", Cosigned: 12, Lag: 0, Failures: failures(nil), LastSuccess: time.UnixMilli(1767225600250)},
		{Name: "w1", Cosigned: 10, Lag: 2, Failures: failures(map[string]uint64{witness.FailUnreachable: 3, witness.FailConflict: 1})},
	}}
	// In the client library's order: families by name, series by label
	// values, labels by name.
	const cosigned = `# HELP ledgerd_checkpoint_cosignatures Valid witness cosignatures held for the latest checkpoint.
# TYPE ledgerd_checkpoint_cosignatures gauge
ledgerd_checkpoint_cosignatures 1
# HELP ledgerd_witness_cosigned_size The largest tree size of this log each witness cosigned, as far as ledgerd knows (0 until it cosigns).
# TYPE ledgerd_witness_cosigned_size gauge
ledgerd_witness_cosigned_size{witness="w0"} 12
ledgerd_witness_cosigned_size{witness="w1"} 10
`
	const failed = `# HELP ledgerd_witness_failures_total Failed submissions to each witness, by kind.
# TYPE ledgerd_witness_failures_total counter
ledgerd_witness_failures_total{kind="ahead",witness="w0"} 0
ledgerd_witness_failures_total{kind="ahead",witness="w1"} 0
ledgerd_witness_failures_total{kind="bad_answer",witness="w0"} 0
ledgerd_witness_failures_total{kind="bad_answer",witness="w1"} 0
ledgerd_witness_failures_total{kind="bad_proof",witness="w0"} 0
ledgerd_witness_failures_total{kind="bad_proof",witness="w1"} 0
ledgerd_witness_failures_total{kind="bad_request",witness="w0"} 0
ledgerd_witness_failures_total{kind="bad_request",witness="w1"} 0
ledgerd_witness_failures_total{kind="conflict",witness="w0"} 0
ledgerd_witness_failures_total{kind="conflict",witness="w1"} 1
ledgerd_witness_failures_total{kind="forbidden",witness="w0"} 0
ledgerd_witness_failures_total{kind="forbidden",witness="w1"} 0
ledgerd_witness_failures_total{kind="proof",witness="w0"} 0
ledgerd_witness_failures_total{kind="proof",witness="w1"} 0
ledgerd_witness_failures_total{kind="server_error",witness="w0"} 0
ledgerd_witness_failures_total{kind="server_error",witness="w1"} 0
ledgerd_witness_failures_total{kind="unknown_log",witness="w0"} 0
ledgerd_witness_failures_total{kind="unknown_log",witness="w1"} 0
ledgerd_witness_failures_total{kind="unreachable",witness="w0"} 0
ledgerd_witness_failures_total{kind="unreachable",witness="w1"} 3
`
	const lag = `# HELP ledgerd_witness_lag_entries Entries the latest checkpoint has beyond the tree the witness last cosigned.
# TYPE ledgerd_witness_lag_entries gauge
ledgerd_witness_lag_entries{witness="w0"} 0
ledgerd_witness_lag_entries{witness="w1"} 2
`
	const lastSuccess = `# HELP ledgerd_witness_last_success_timestamp_seconds When each witness last returned a valid cosignature (Unix time; 0: never since the start).
# TYPE ledgerd_witness_last_success_timestamp_seconds gauge
ledgerd_witness_last_success_timestamp_seconds{witness="w0"} 1.76722560025e+09
ledgerd_witness_last_success_timestamp_seconds{witness="w1"} 0
`
	const needed = `# HELP ledgerd_witnesses_needed Cosignatures a checkpoint should gather (witnesses_needed).
# TYPE ledgerd_witnesses_needed gauge
ledgerd_witnesses_needed 1
`
	sequencer, follower := cosigned+failed+lag+lastSuccess+needed, cosigned+lag+needed
	got := func(s witness.Snapshot) string {
		return apitest.Exposition(t, func(ch chan<- prometheus.Metric) { collectWitnessSnapshot(ch, s) })
	}
	if g := got(snap); g != sequencer {
		t.Errorf("a sequencer's series:\n%s\nwant\n%s", g, sequencer)
	}
	snap.Following = true
	if g := got(snap); g != follower {
		t.Errorf("a follower's series:\n%s\nwant\n%s", g, follower)
	}
	if g := got(witness.Snapshot{}); g != "" {
		t.Errorf("without witnesses:\n%s", g)
	}
}
