package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// rotate --overlap keeps the old token as the previous one until now +
// the overlap; a second rotation replaces it (and says so while it was
// valid); a plain rotation drops it. Other members stay as they were.
func TestTokenRotateOverlap(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	first, hash := newToken()
	path := filepath.Join(dir, "prod.json")
	if err := os.WriteFile(path, []byte(strings.Replace(handWrittenConfig, "%s", hash, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	rotate := func(overlap time.Duration, now time.Time) tokenChange {
		t.Helper()
		ch, err := changeToken(path, "rotate", "local", overlap, now)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	load := func() *config.Config {
		t.Helper()
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	now := time.Date(2026, 12, 1, 14, 0, 0, 500_000_000, time.FixedZone("CET", 3600))

	ch := rotate(time.Hour, now)
	second := ch.token
	m := load().Mediators[0]
	if m.PreviousTokenSHA256 != hash || m.PreviousTokenExpires != "2026-12-01T14:00:00Z" || ch.expires != m.PreviousTokenExpires || ch.dropped != "" {
		t.Errorf("after rotate --overlap 1h: %+v, %+v", m, ch)
	}
	if m.RatePerSecond != 50 || m.Burst != 100 || m.TokenSHA256 != apitest.TokenHash(second) {
		t.Errorf("after rotate --overlap 1h: %+v", m)
	}
	ts := load().MediatorTokens()
	for _, tok := range []string{first, second} {
		if name, _ := ts.Authenticate(tok, now); name != "local" {
			t.Errorf("token %s after rotate --overlap: %q", tok[:8], name)
		}
	}

	// A second rotation 10 minutes later: the first token goes, said so.
	ch = rotate(30*time.Minute, now.Add(10*time.Minute))
	third := ch.token
	m = load().Mediators[0]
	if m.PreviousTokenSHA256 != apitest.TokenHash(second) || m.PreviousTokenExpires != "2026-12-01T13:40:00Z" || ch.dropped != "2026-12-01T14:00:00Z" {
		t.Errorf("after a second rotate --overlap: %+v, %+v", m, ch)
	}
	ts = load().MediatorTokens()
	if name, _ := ts.Authenticate(first, now.Add(10*time.Minute)); name != "" {
		t.Errorf("the first token after a second rotation: %q", name)
	}

	// A plain rotation after the previous token expired: nothing said.
	ch = rotate(0, now.Add(time.Hour))
	m = load().Mediators[0]
	if m.PreviousTokenSHA256 != "" || m.PreviousTokenExpires != "" || ch.dropped != "" || ch.expires != "" {
		t.Errorf("after a plain rotate: %+v, %+v", m, ch)
	}
	text, _ := os.ReadFile(path)
	if bytes.Contains(text, []byte("previous_token")) {
		t.Errorf("a plain rotate left the previous members:\n%s", text)
	}
	ts = load().MediatorTokens()
	if name, _ := ts.Authenticate(third, now.Add(time.Hour)); name != "" {
		t.Error("the third token after a plain rotation still authenticates")
	}
	if name, _ := ts.Authenticate(ch.token, now.Add(time.Hour)); name != "local" {
		t.Error("the fourth token does not authenticate")
	}

	// The command: --overlap, then a plain rotate dropping a valid one.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"token", "rotate", "local", "--overlap", "1h", "--config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("token rotate --overlap: %d %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the old token stays valid beside the new one until ") || strings.Contains(stderr.String(), "is dropped") {
		t.Errorf("token rotate --overlap says:\n%s", stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"token", "rotate", "local", "--config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("token rotate: %d %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `the previous token of mediator "local", valid until `) {
		t.Errorf("a plain rotate dropping a valid previous token says:\n%s", stderr.String())
	}
	stderr.Reset()
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{{"rotate", "local", "--overlap", "-1h"}, {"rotate", "local", "--overlap", "1"}, {"add", "x", "--overlap", "1h"}} {
		if code := run(context.Background(), append(append([]string{"token"}, args...), "--config", path), &stdout, &stderr); code != 2 {
			t.Errorf("token %v: exit %d, want 2", args, code)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused token command changed the config")
	}
}

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
