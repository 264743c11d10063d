package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/witnesstest"
	"github.com/decisionledger/ledger/ledger"
)

// addFakeWitnesses starts n fake witnesses for the log of c's key and
// lists them in c's witnesses, named w0, w1, ...
func addFakeWitnesses(t testing.TB, c *config.Config, n int) []*witnesstest.Witness {
	t.Helper()
	key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ws []*witnesstest.Witness
	for i := range n {
		w := witnesstest.New(t, fmt.Sprintf("witness-%d.example.org", i), key.VerifierKey())
		ws = append(ws, w)
		c.Witnesses = append(c.Witnesses, config.WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: w.URL, Key: w.VKey})
	}
	return ws
}

// witnessServer starts a server with n fake witnesses, all needed.
func witnessServer(t testing.TB, n int) (*testServer, []*witnesstest.Witness) {
	t.Helper()
	var ws []*witnesstest.Witness
	s := startServerWith(t, func(c *config.Config) {
		ws = addFakeWitnesses(t, c, n)
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	})
	return s, ws
}

func TestConfigWitnesses(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, _ := torchwood.NewCosignatureSigner("witness.example.org", priv)
	_, priv2, _ := ed25519.GenerateKey(rand.Reader)
	s2, _ := torchwood.NewCosignatureSigner("witness-2.example.org", priv2)
	good := config.WitnessConfig{Name: "w", URL: "https://witness.example.org", Key: s.Verifier().String()}
	good2 := config.WitnessConfig{Name: "w2", URL: "http://witness-2.example.org/prefix", Key: s2.Verifier().String()}
	sameKey := good2
	sameKey.Key = good.Key
	for _, tc := range []struct {
		ws     []config.WitnessConfig
		needed int
		want   string // "" accepted
	}{
		{[]config.WitnessConfig{good, good2}, 0, ""},
		{[]config.WitnessConfig{good, good2}, 1, ""},
		{[]config.WitnessConfig{good, good2}, 3, "witnesses_needed 3 is out of range"},
		{nil, 1, "witnesses_needed 1 is out of range"},
		{[]config.WitnessConfig{good, good2}, -1, "out of range"},
		{[]config.WitnessConfig{good, good}, 0, `name "w" repeated`},
		{[]config.WitnessConfig{good, sameKey}, 0, "the same public key"},
		{[]config.WitnessConfig{{Name: "w", URL: "ftp://witness.example.org", Key: good.Key}}, 0, "is not an http or https URL"},
		{[]config.WitnessConfig{{Name: "w", URL: "witness.example.org", Key: good.Key}}, 0, "is not an http or https URL"},
		{[]config.WitnessConfig{{Name: "w", URL: good.URL, Key: "witness.example.org+00000000+AAAA"}}, 0, "key"},
		{[]config.WitnessConfig{{Name: "", URL: good.URL, Key: good.Key}}, 0, "name is required"},
	} {
		s := startServerWith(t, nil)
		c := *s.cfg
		c.Witnesses, c.WitnessesNeeded = tc.ws, tc.needed
		err := c.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("witnesses %v, needed %d: got %v, want %q", tc.ws, tc.needed, err, tc.want)
		}
	}
}

// TestWitnessMetricsPage: /metrics carries the witnesses' series of a
// running server: one witness cosigns, the other is unreachable. (The
// unreachable one may have cosigned the empty tree before it closed, so
// its last success time is not held to zero.)
func TestWitnessMetricsPage(t *testing.T) {
	s, ws := witnessServer(t, 2)
	ws[1].Close()
	size := apitest.AppendN(t, s.url, s.token, s.l, 0, 5)
	apitest.WaitCosignatures(t, s.url, size, 1)
	apitest.WaitUntil(t, "unreachable failures for w1", func() bool {
		return !strings.Contains(apitest.Get(t, s.url+"/metrics"), `ledgerd_witness_failures_total{kind="unreachable",witness="w1"} 0`)
	})
	wants := []string{
		"ledgerd_witnesses_needed 2",
		"ledgerd_checkpoint_cosignatures 1",
		fmt.Sprintf(`ledgerd_witness_cosigned_size{witness="w0"} %d`, size),
		`ledgerd_witness_cosigned_size{witness="w1"} 0`,
		`ledgerd_witness_lag_entries{witness="w0"} 0`,
		fmt.Sprintf(`ledgerd_witness_lag_entries{witness="w1"} %d`, size),
		`ledgerd_witness_failures_total{kind="unreachable",witness="w0"} 0`,
	}
	// A scrape may fall between a witness's answer and the series that
	// count it: wait until the page agrees with the served checkpoint,
	// then hold it to every line.
	var m string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		m = apitest.Get(t, s.url+"/metrics")
		var missing []string
		for _, want := range wants {
			if !strings.Contains(m, "\n"+want+"\n") {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var series []string
			for _, line := range strings.Split(m, "\n") {
				if strings.HasPrefix(line, "ledgerd_witness") || strings.HasPrefix(line, "ledgerd_checkpoint") {
					series = append(series, line)
				}
			}
			t.Fatalf("after a minute the page lacks %q; its witness series:\n%s", missing, strings.Join(series, "\n"))
		}
	}
	if strings.Contains(m, `ledgerd_witness_last_success_timestamp_seconds{witness="w0"} 0`+"\n") {
		t.Errorf("no success time for w0:\n%s", m)
	}
}
