package daemon

import (
	"os"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestClusterMetricsFamilies: /metrics of an instance of a cluster
// writes the families of server/testdata/metrics.txt (server's
// TestMetricsFamilies: a single ledgerd's), each with its type, HELP
// text, label names and buckets, and the series always written; nothing
// else.
func TestClusterMetricsFamilies(t *testing.T) {
	f, err := os.Open("../server/testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := apitest.ParseExposition(t, "server/testdata/metrics.txt", f)

	t.Run("cluster", func(t *testing.T) {
		f := apitest.NewClusterFixture(t)
		a := startInstance(t, f.Config(t, "a", "1s"))
		apitest.WaitFor(t, "a to sequence", func() bool { code, _ := apitest.Readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
		apitest.CheckFamilies(t, want, apitest.Scrape(t, a.url), append(apitest.ClusterFamilies, "ledgerd_tree_size", "ledgerd_checkpoint_age_seconds", "ledgerd_connections_open"))
	})
}
