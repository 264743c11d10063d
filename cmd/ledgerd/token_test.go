package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/config"
)

// handWrittenConfig is a config as an operator might write it: its own
// member order, spacing and optional fields.
const handWrittenConfig = `{
    "store_dir": "store",
    "key_file": "ledger.key",
    "mediators": [
        {"name": "local", "token_sha256": "%s", "rate_per_second": 50, "burst": 100}
    ],
    "max_body_bytes": 65536,
    "reader_tokens_sha256": ["0000000000000000000000000000000000000000000000000000000000000000"],
    "idle_timeout": "45s"
}
`

// initDataDir creates a data directory in dir as a first start does:
// origin localOrigin, mediator localMediator, whose token it returns. If
// dir already has a config it returns that config and no token.
func initDataDir(dir string) (configPath, token string, err error) {
	configPath = filepath.Join(dir, configName)
	if _, err := os.Stat(configPath); err == nil {
		return configPath, "", nil
	}
	res, err := createDataDir(newDataDir{config: configPath, origin: localOrigin, mediator: localMediator, reuseKey: true})
	if err != nil {
		return "", "", err
	}
	return configPath, res.token, nil
}

// tokenCommand runs "ledgerd token ARGS" and returns the token it printed.
func tokenCommand(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"token"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("ledgerd token %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	tok := strings.TrimSuffix(stdout.String(), "\n")
	if len(tok) != 64 || strings.Contains(stderr.String(), tok) {
		t.Fatalf("ledgerd token %s printed %q on stdout and %q on stderr", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	return tok
}

// add and rotate change only the one mediator's token: every other member
// keeps its order and value, the file stays mode 0600 and holds no token.
func TestTokenAddRotate(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	localToken, localHash := newToken()
	path := filepath.Join(dir, "prod.json")
	if err := os.WriteFile(path, []byte(strings.Replace(handWrittenConfig, "%s", localHash, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	billing := tokenCommand(t, "add", "billing", "--config", path)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{billing: "billing", localToken: "local"} {
		if got, ok := cfg.Authenticate(tok); !ok || got != want {
			t.Errorf("after add, a token of %s authenticates as %q", want, got)
		}
	}
	if m := cfg.Mediators[0]; m.RatePerSecond != 50 || m.Burst != 100 {
		t.Errorf("after add, local is %+v", m)
	}

	local := tokenCommand(t, "rotate", "--config", path, "local")
	cfg, err = config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Authenticate(localToken); ok {
		t.Error("after rotate, local's old token still authenticates")
	}
	for tok, want := range map[string]string{billing: "billing", local: "local"} {
		if got, ok := cfg.Authenticate(tok); !ok || got != want {
			t.Errorf("after rotate, a token of %s authenticates as %q", want, got)
		}
	}
	if m := cfg.Mediators[0]; m.RatePerSecond != 50 || m.Burst != 100 {
		t.Errorf("after rotate, local is %+v", m)
	}

	after, _ := os.ReadFile(path)
	for _, tok := range []string{localToken, billing, local} {
		if bytes.Contains(after, []byte(tok)) {
			t.Error("the config holds a token")
		}
	}
	was, err := topMembers(before)
	if err != nil {
		t.Fatal(err)
	}
	now, err := topMembers(after)
	if err != nil {
		t.Fatal(err)
	}
	if len(was) != len(now) {
		t.Fatalf("members %d, then %d", len(was), len(now))
	}
	for i := range was {
		if was[i].key != now[i].key {
			t.Errorf("member %d was %s, is %s", i, was[i].key, now[i].key)
		} else if was[i].key != "mediators" && compact(t, was[i].value) != compact(t, now[i].value) {
			t.Errorf("%s was %s, is %s", was[i].key, was[i].value, now[i].value)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, %v", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".prod.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// topMember is one member of a config's object, its value as written.
type topMember struct {
	key   string
	value json.RawMessage
}

// topMembers splits a config's object into its members, in order.
func topMembers(b []byte) ([]topMember, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var ms []topMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, topMember{t.(string), v})
	}
	return ms, nil
}

func compact(t *testing.T, v []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A config changed by someone else while ledgerd token ran is not
// replaced.
func TestReplaceConfigRefusesChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledgerd.json")
	if err := os.WriteFile(path, []byte("{\"listen\": \"127.0.0.1:8081\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := replaceConfig(path, []byte("{}\n"), []byte("{\"listen\": \"127.0.0.1:8082\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "changed while this command ran") {
		t.Fatalf("replaceConfig over a changed file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\"listen\": \"127.0.0.1:8081\"}\n" {
		t.Errorf("the file is now %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".ledgerd.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A member encoding/json would match twice (names match regardless of
// case) is refused rather than guessed.
func TestTokenRefusesAmbiguousConfig(t *testing.T) {
	dir := t.TempDir()
	path, _, err := initDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	_, hash := newToken()
	b = bytes.Replace(b, []byte(`"key_file"`), []byte(`"Mediators": [{"name": "other", "token_sha256": "`+hash+`"}], "key_file"`), 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"token", "add", "billing", "--data", dir}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "mediators appears twice") {
		t.Fatalf("exit %d, %s", code, stderr.String())
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, b) {
		t.Error("the config changed")
	}
}

// rotate --overlap says until when the old token stays valid; a plain
// rotate says it drops a previous token still valid. A refused command
// (a negative or unitless --overlap, --overlap with add) exits 2 and
// changes nothing. config.RotateMediatorToken's test holds the change
// itself.
func TestTokenRotateOverlap(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, hash := newToken()
	path := filepath.Join(dir, "prod.json")
	if err := os.WriteFile(path, []byte(strings.Replace(handWrittenConfig, "%s", hash, 1)), 0o600); err != nil {
		t.Fatal(err)
	}

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
