package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The start's log line (the config's LogValue) names the previous tokens
// still valid and their expiries, never a hash; an expired one is left out.
func TestPreviousTokenStartLog(t *testing.T) {
	valid, expired := time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "2020-01-01T00:00:00Z"
	cfg := Config{Mediators: []Mediator{
		{Name: "billing", TokenSHA256: tokenHash("a"), PreviousTokenSHA256: tokenHash("b"), PreviousTokenExpires: valid},
		{Name: "crm", TokenSHA256: tokenHash("c"), PreviousTokenSHA256: tokenHash("d"), PreviousTokenExpires: expired},
	}}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("ledgerd started", "config", cfg)
	line := buf.String()
	if !strings.Contains(line, `"previous_tokens":"billing=`+valid+`"`) || strings.Contains(line, tokenHash("b")) || strings.Contains(line, "crm=") {
		t.Errorf("the start's log line: %s", line)
	}
}
