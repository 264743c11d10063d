package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// The start's log line (the config's LogValue) names the previous tokens
// still valid and their expiries, never a hash; an expired one is left out.
func TestPreviousTokenStartLog(t *testing.T) {
	valid, expired := time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "2020-01-01T00:00:00Z"
	cfg := config.Config{Mediators: []config.Mediator{
		{Name: "billing", TokenSHA256: apitest.TokenHash("a"), PreviousTokenSHA256: apitest.TokenHash("b"), PreviousTokenExpires: valid},
		{Name: "crm", TokenSHA256: apitest.TokenHash("c"), PreviousTokenSHA256: apitest.TokenHash("d"), PreviousTokenExpires: expired},
	}}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("ledgerd started", "config", cfg)
	line := buf.String()
	if !strings.Contains(line, `"previous_tokens":"billing=`+valid+`"`) || strings.Contains(line, apitest.TokenHash("b")) || strings.Contains(line, "crm=") {
		t.Errorf("the start's log line: %s", line)
	}
}
