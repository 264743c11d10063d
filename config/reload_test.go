package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
)

func TestRestartFields(t *testing.T) {
	start := &Config{Listen: "127.0.0.1:8080", KeyFile: "/k", StoreDir: "/s", Mediators: []Mediator{{Name: "a"}},
		Approvals: &ApprovalsConfig{PendingTTL: "1h"}}
	cases := []struct {
		change func(c *Config)
		want   string
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Mediators = nil; c.ReaderTokensSHA256 = []string{"x"} }, ""},
		{func(c *Config) {
			c.Approvals = &ApprovalsConfig{PendingTTL: "1h", Approvers: []approver.Approver{{Name: "b"}}}
		}, ""},
		{func(c *Config) { c.Listen = "127.0.0.1:1" }, "listen"},
		{func(c *Config) { c.TLS = &TLSConfig{CertFile: "c"}; c.MaxBodyBytes = 1 }, "max_body_bytes,tls"},
		{func(c *Config) { c.Approvals = nil }, "approvals"},
		{func(c *Config) {
			c.Approvals = &ApprovalsConfig{PendingTTL: "2h", TrustedOrigins: []string{"https://example.org"}}
		},
			"approvals.pending_ttl,approvals.trusted_origins"},
		{func(c *Config) { c.Witnesses = []WitnessConfig{{Name: "w"}}; c.Cluster = &ClusterConfig{} }, "cluster,witnesses"},
	}
	for i, tc := range cases {
		next := *start
		ap := *start.Approvals
		next.Approvals = &ap
		tc.change(&next)
		got := RestartFields(start, &next)
		slices.Sort(got)
		if strings.Join(got, ",") != tc.want {
			t.Errorf("case %d: %v, want %s", i, got, tc.want)
		}
	}
}

func TestDiffCredentials(t *testing.T) {
	old := &Config{Mediators: []Mediator{{Name: "a", TokenSHA256: "1"}, {Name: "b", TokenSHA256: "2"}, {Name: "c", TokenSHA256: "3"}}}
	next := &Config{Mediators: []Mediator{{Name: "a", TokenSHA256: "1", RatePerSecond: 5}, {Name: "c", TokenSHA256: "4"}, {Name: "d", TokenSHA256: "5"}}}
	ch := DiffCredentials(old, next)
	got := fmt.Sprint(ch.MediatorsAdded, ch.MediatorsRemoved, ch.TokensRotated, ch.RatesChanged, ch.ReadersChanged)
	if got != "[d] [b] [c] [a] false" {
		t.Errorf("diff: %s", got)
	}
	if v := ch.LogValue().String(); strings.Contains(v, "token_sha256") || !strings.Contains(v, "tokens_rotated=c") {
		t.Errorf("log value %s", v)
	}
}
