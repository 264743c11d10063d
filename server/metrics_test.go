package server

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// TestMetricsFamilies: /metrics of a running ledgerd (a cluster's:
// daemon's TestClusterMetricsFamilies) writes the families of testdata/metrics.txt (the hand-written
// exposition's, before the Prometheus client library wrote them): each
// with its type, HELP text, label names and buckets, and the series
// always written; nothing else. docs/api.md's GET /metrics row names the
// same families with the same labels.
func TestMetricsFamilies(t *testing.T) {
	f, err := os.Open("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := apitest.ParseExposition(t, "testdata/metrics.txt", f)

	t.Run("docs", func(t *testing.T) {
		b, err := os.ReadFile("../docs/api.md")
		if err != nil {
			t.Fatal(err)
		}
		var row string
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "| `GET /metrics` |") {
				row = line
			}
		}
		documented := map[string][]string{}
		for _, m := range regexp.MustCompile("`(ledgerd_[a-z_]+)(?:\\{([a-z_,]+)\\})?`").FindAllStringSubmatch(row, -1) {
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
				slices.Sort(labels)
			}
			documented[m[1]] = labels
		}
		for name, fam := range want {
			labels, ok := documented[name]
			if !ok {
				t.Errorf("docs/api.md's GET /metrics row lacks %s", name)
			} else if got := apitest.LabelNames(fam); !slices.Equal(labels, got) {
				t.Errorf("docs/api.md: %s{%s}, the metric's labels are {%s}", name, strings.Join(labels, ","), strings.Join(got, ","))
			}
		}
		for name := range documented {
			if want[name] == nil {
				t.Errorf("docs/api.md's GET /metrics row names %s, which testdata/metrics.txt lacks", name)
			}
		}
	})

	t.Run("single", func(t *testing.T) {
		s := startServerWith(t, func(c *config.Config) {
			c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies
			addFakeWitnesses(t, c, 1)
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
		if status, _, b := apitest.DecideOn(t, s.url, s.token, apitest.Payment(t)); status != http.StatusCreated {
			t.Fatalf("decide: %d %s", status, b)
		}
		if status, _, _ := apitest.DecideOn(t, s.url, "", apitest.Payment(t)); status != http.StatusUnauthorized {
			t.Fatalf("decide without a token: %d", status)
		}
		// The mediator's token becomes its previous one.
		m := s.cfg.Mediators[0]
		m.PreviousTokenSHA256, m.PreviousTokenExpires, m.TokenSHA256 = m.TokenSHA256, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), apitest.TokenHash("new-token-example")
		s.srv.creds.Apply(withMediators(s.cfg, m))
		if status, _, b := apitest.DecideOn(t, s.url, s.token, apitest.Payment(t)); status != http.StatusCreated {
			t.Fatalf("decide with the previous token: %d %s", status, b)
		}
		var required []string
		for name := range want {
			if !slices.Contains(apitest.ClusterFamilies, name) {
				required = append(required, name)
			}
		}
		apitest.CheckFamilies(t, want, apitest.Scrape(t, s.url), required)
	})
}
