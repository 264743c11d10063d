package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/ledger"
)

// handWritten is a config as an operator might write it: its own member
// order, spacing and optional fields; %s is local's token hash.
const handWritten = `{
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

// handWrittenFile writes handWritten, local known by localHash and with
// extra members before its last, to a new directory with a key and a
// store, and returns its path.
func handWrittenFile(t *testing.T, localHash, extra string) string {
	t.Helper()
	dir := t.TempDir()
	skey, _, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(handWritten, "%s", localHash, 1)
	if extra != "" {
		text = strings.Replace(text, `    "idle_timeout"`, "    "+extra+",\n    \"idle_timeout\"", 1)
	}
	path := filepath.Join(dir, "prod.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keptMembers fails t unless after has the members of before, in the same
// order and with the same values but for those named in changed, and
// then those named in added.
func keptMembers(t *testing.T, before, after []byte, changed []string, added ...string) {
	t.Helper()
	was, err := members(before)
	if err != nil {
		t.Fatal(err)
	}
	now, err := members(after)
	if err != nil {
		t.Fatal(err)
	}
	var wasKeys, nowKeys []string
	for _, m := range was {
		wasKeys = append(wasKeys, m.key)
	}
	for _, m := range now {
		nowKeys = append(nowKeys, m.key)
	}
	if want := strings.Join(append(wasKeys, added...), ","); strings.Join(nowKeys, ",") != want {
		t.Fatalf("members %v, then %v; want %s", wasKeys, nowKeys, want)
	}
	for i := range was {
		if !strings.Contains(","+strings.Join(changed, ",")+",", ","+was[i].key+",") && compact(t, was[i].value) != compact(t, now[i].value) {
			t.Errorf("%s was %s, is %s", was[i].key, was[i].value, now[i].value)
		}
	}
	if !bytes.HasPrefix(after, []byte("{\n  \"")) || !bytes.HasSuffix(after, []byte("\n}\n")) {
		t.Errorf("the changed text is not indented by two spaces:\n%s", after)
	}
}

func compact(t *testing.T, v []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Adding a mediator and rotating one's token change only the mediators
// member: every other member keeps its place and value, and the other
// mediators' members (local's rate) stay.
func TestAddRotateMediatorToken(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), "")
	before := readFile(t, path)

	added, err := AddMediatorToken(before, path, "billing", tokenHash("billing-token-example"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("AddMediatorToken wrote the file")
	}
	cfg, err := Parse(added, path)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"billing-token-example": "billing", "local-token-example": "local"} {
		if got, ok := cfg.Authenticate(tok); !ok || got != want {
			t.Errorf("after add, a token of %s authenticates as %q", want, got)
		}
	}
	if m := cfg.Mediators[0]; m.RatePerSecond != 50 || m.Burst != 100 {
		t.Errorf("after add, local is %+v", m)
	}
	keptMembers(t, before, added, []string{"mediators"})

	rotated, rot, err := RotateMediatorToken(added, path, "local", tokenHash("local-token-2-example"), 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rot != (TokenRotation{}) {
		t.Errorf("a plain rotation without a previous token: %+v", rot)
	}
	cfg, err = Parse(rotated, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Authenticate("local-token-example"); ok {
		t.Error("after rotate, local's old token still authenticates")
	}
	for tok, want := range map[string]string{"billing-token-example": "billing", "local-token-2-example": "local"} {
		if got, ok := cfg.Authenticate(tok); !ok || got != want {
			t.Errorf("after rotate, a token of %s authenticates as %q", want, got)
		}
	}
	if m := cfg.Mediators[0]; m.RatePerSecond != 50 || m.Burst != 100 {
		t.Errorf("after rotate, local is %+v", m)
	}
	keptMembers(t, before, rotated, []string{"mediators"})
}

// A change that cannot be made is refused with the reason, and no text:
// a config invalid before, or that would be after, a mediator that
// exists (add) or does not (rotate), a member encoding/json would match
// twice (names match regardless of case).
func TestMediatorTokenRefusals(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), "")
	text := readFile(t, path)
	ambiguous := bytes.Replace(text, []byte(`"store_dir"`), []byte(`"Mediators": [{"name": "other", "token_sha256": "`+tokenHash("other-token-example")+`"}], "store_dir"`), 1)
	invalid := bytes.Replace(text, []byte(`"45s"`), []byte(`"0s"`), 1)
	for _, c := range []struct {
		text   []byte
		rotate bool
		name   string
		hash   string
		want   string
	}{
		{text, false, "local", tokenHash("x"), `mediator "local" exists in ` + path + `: "ledgerd token rotate" gives it a new token`},
		{text, true, "billing", tokenHash("x"), `no mediator "billing" in ` + path + `: "ledgerd token add" adds one`},
		{text, false, "billing", "ABC", "the changed config would be refused: " + path + ": mediators[1] (billing): token_sha256 is not 64 lower-case hex digits"},
		{text, true, "local", tokenHash("local-token-example"), "the changed config would be refused"},
		{invalid, false, "billing", tokenHash("x"), "idle_timeout"},
		{invalid, false, "billing", tokenHash("x"), "(fix the config first)"},
		{ambiguous, false, "billing", tokenHash("x"), path + ": mediators appears twice: edit the config by hand"},
		{ambiguous, true, "local", tokenHash("x"), "mediators appears twice"},
		{[]byte("[]"), false, "billing", tokenHash("x"), "(fix the config first)"},
	} {
		var changed []byte
		var err error
		if c.rotate {
			changed, _, err = RotateMediatorToken(c.text, path, c.name, c.hash, time.Hour, time.Now())
		} else {
			changed, err = AddMediatorToken(c.text, path, c.name, c.hash)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || changed != nil {
			t.Errorf("rotate %v %s: %v, %d bytes; want %q", c.rotate, c.name, err, len(changed), c.want)
		}
		if err != nil && strings.Contains(err.Error(), c.hash) {
			t.Errorf("rotate %v %s: the error holds the hash: %v", c.rotate, c.name, err)
		}
	}
}

// A rotation with an overlap keeps the old token as the previous one
// until now + the overlap; a second rotation replaces it (and says so
// while it was valid); a plain rotation drops it. Other members stay as
// they were.
func TestRotateMediatorTokenOverlap(t *testing.T) {
	const first = "first-token-example"
	path := handWrittenFile(t, tokenHash(first), "")
	rotate := func(tok string, overlap time.Duration, now time.Time) TokenRotation {
		t.Helper()
		text, rot, err := RotateMediatorToken(readFile(t, path), path, "local", tokenHash(tok), overlap, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, text, 0o600); err != nil {
			t.Fatal(err)
		}
		return rot
	}
	load := func() *Config {
		t.Helper()
		cfg, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	now := time.Date(2026, 12, 1, 14, 0, 0, 500_000_000, time.FixedZone("CET", 3600))

	const second = "second-token-example"
	rot := rotate(second, time.Hour, now)
	m := load().Mediators[0]
	if m.PreviousTokenSHA256 != tokenHash(first) || m.PreviousTokenExpires != "2026-12-01T14:00:00Z" || rot.Expires != m.PreviousTokenExpires || rot.Dropped != "" {
		t.Errorf("after rotate --overlap 1h: %+v, %+v", m, rot)
	}
	if m.RatePerSecond != 50 || m.Burst != 100 || m.TokenSHA256 != tokenHash(second) {
		t.Errorf("after rotate --overlap 1h: %+v", m)
	}
	ts := load().MediatorTokens()
	for _, tok := range []string{first, second} {
		if name, _ := ts.Authenticate(tok, now); name != "local" {
			t.Errorf("token %s after rotate --overlap: %q", tok, name)
		}
	}

	// A second rotation 10 minutes later: the first token goes, said so.
	const third = "third-token-example"
	rot = rotate(third, 30*time.Minute, now.Add(10*time.Minute))
	m = load().Mediators[0]
	if m.PreviousTokenSHA256 != tokenHash(second) || m.PreviousTokenExpires != "2026-12-01T13:40:00Z" || rot.Dropped != "2026-12-01T14:00:00Z" {
		t.Errorf("after a second rotate --overlap: %+v, %+v", m, rot)
	}
	ts = load().MediatorTokens()
	if name, _ := ts.Authenticate(first, now.Add(10*time.Minute)); name != "" {
		t.Errorf("the first token after a second rotation: %q", name)
	}

	// A plain rotation after the previous token expired: nothing said.
	const fourth = "fourth-token-example"
	rot = rotate(fourth, 0, now.Add(time.Hour))
	m = load().Mediators[0]
	if m.PreviousTokenSHA256 != "" || m.PreviousTokenExpires != "" || rot.Dropped != "" || rot.Expires != "" {
		t.Errorf("after a plain rotate: %+v, %+v", m, rot)
	}
	text := readFile(t, path)
	if bytes.Contains(text, []byte("previous_token")) {
		t.Errorf("a plain rotate left the previous members:\n%s", text)
	}
	ts = load().MediatorTokens()
	if name, _ := ts.Authenticate(third, now.Add(time.Hour)); name != "" {
		t.Error("the third token after a plain rotation still authenticates")
	}
	if name, _ := ts.Authenticate(fourth, now.Add(time.Hour)); name != "local" {
		t.Error("the fourth token does not authenticate")
	}
}

// testApprover is a valid approver name, whose password hash is made once
// per test binary.
func testApprover(t *testing.T, name string, actions ...string) approver.Approver {
	t.Helper()
	if testPasswordHash == "" {
		h, err := approver.HashPassword("a long enough passphrase")
		if err != nil {
			t.Fatal(err)
		}
		testPasswordHash = h
	}
	return approver.Approver{Name: name, PasswordHash: testPasswordHash, Actions: actions}
}

var testPasswordHash string

// Adding an approver makes the approvals member, last, if there is none;
// an existing one keeps its other members. Only approvals.approvers
// changes; removing takes one approver away.
func TestAddRemoveApprover(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), "")
	before := readFile(t, path)
	alice := testApprover(t, "alice", "send_email", "refund")
	alice.Principals = []string{"agent:billing"}
	text, err := AddApprover(before, path, alice)
	if err != nil {
		t.Fatal(err)
	}
	keptMembers(t, before, text, nil, "approvals")
	cfg, err := Parse(text, path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Approvals == nil || len(cfg.Approvals.Approvers) != 1 {
		t.Fatalf("after add, approvals are %+v", cfg.Approvals)
	}
	if a := cfg.Approvals.Approvers[0]; a.Name != "alice" || strings.Join(a.Actions, ",") != "send_email,refund" || strings.Join(a.Principals, ",") != "agent:billing" || a.PasswordHash != alice.PasswordHash {
		t.Errorf("after add, alice is %+v", a)
	}

	withBob, err := AddApprover(text, path, testApprover(t, "bob", "*"))
	if err != nil {
		t.Fatal(err)
	}
	keptMembers(t, text, withBob, []string{"approvals"})
	removed, err := RemoveApprover(withBob, path, "alice")
	if err != nil {
		t.Fatal(err)
	}
	keptMembers(t, withBob, removed, []string{"approvals"})
	cfg, err = Parse(removed, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Approvals.Approvers) != 1 || cfg.Approvals.Approvers[0].Name != "bob" || cfg.Approvals.Approvers[0].Actions[0] != "*" {
		t.Errorf("after remove, the approvers are %+v", cfg.Approvals.Approvers)
	}

	for _, approvals := range []string{
		`"approvals": {"pending_ttl": "2h", "trusted_origins": ["https://ledger.example.com"]}`,
		`"approvals": {"pending_ttl": "2h", "trusted_origins": ["https://ledger.example.com"], "approvers": null}`,
		`"approvals": null`,
	} {
		path := handWrittenFile(t, tokenHash("local-token-example"), approvals)
		before := readFile(t, path)
		text, err := AddApprover(before, path, testApprover(t, "carol", "refund"))
		if err != nil {
			t.Fatalf("%s: %v", approvals, err)
		}
		keptMembers(t, before, text, []string{"approvals"})
		cfg, err := Parse(text, path)
		if err != nil {
			t.Fatal(err)
		}
		if a := cfg.Approvals; len(a.Approvers) != 1 || a.Approvers[0].Name != "carol" || a.Approvers[0].Principals != nil {
			t.Errorf("%s: approvals after add: %+v", approvals, a)
		}
		if a := cfg.Approvals; approvals != `"approvals": null` && (a.PendingTTL != "2h" || len(a.TrustedOrigins) != 1) {
			t.Errorf("%s: approvals after add: %+v", approvals, a)
		}
	}
}

// An approver change that cannot be made is refused with the reason, and
// no text.
func TestApproverRefusals(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), `"approvals": {"approvers": []}`)
	text, err := AddApprover(readFile(t, path), path, testApprover(t, "alice", "refund"))
	if err != nil {
		t.Fatal(err)
	}
	noHash := testApprover(t, "bob", "refund")
	noHash.PasswordHash = ""
	twice := bytes.Replace(text, []byte(`"approvals"`), []byte(`"Approvals": {}, "approvals"`), 1)
	approversTwice := bytes.Replace(text, []byte(`"approvers": [`), []byte(`"approvers": [], "Approvers": [`), 1)
	invalid := bytes.Replace(text, []byte(`"45s"`), []byte(`"0s"`), 1)
	for _, c := range []struct {
		name   string
		change func() ([]byte, error)
		want   string
	}{
		{"add alice", func() ([]byte, error) { return AddApprover(text, path, testApprover(t, "alice", "*")) }, `approver "alice" exists in ` + path + `: "ledgerd approver remove" it first to change it`},
		{"remove bob", func() ([]byte, error) { return RemoveApprover(text, path, "bob") }, `no approver "bob" in ` + path},
		{"add bob without a hash", func() ([]byte, error) { return AddApprover(text, path, noHash) }, "the changed config would be refused: " + path + ": approvals"},
		{"add bob to an invalid config", func() ([]byte, error) { return AddApprover(invalid, path, testApprover(t, "bob", "*")) }, "(fix the config first)"},
		{"remove alice from an invalid config", func() ([]byte, error) { return RemoveApprover(invalid, path, "alice") }, "(fix the config first)"},
		{"add bob, approvals twice", func() ([]byte, error) { return AddApprover(twice, path, testApprover(t, "bob", "*")) }, path + ": approvals appears twice: edit the config by hand"},
		{"add bob, approvers twice", func() ([]byte, error) { return AddApprover(approversTwice, path, testApprover(t, "bob", "*")) }, path + ": approvals: approvers appears twice"},
	} {
		changed, err := c.change()
		if err == nil || !strings.Contains(err.Error(), c.want) || changed != nil {
			t.Errorf("%s: %v, %d bytes; want %q", c.name, err, len(changed), c.want)
		}
	}
}

// Rotating the key names the new key file (relative to the config's
// directory when beneath it) and adds the old verifier key to
// previous_keys, made after key_file; only those two members change. A
// config already changed so comes back as it was.
func TestRotateKey(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), "")
	dir := filepath.Dir(path)
	before := readFile(t, path)
	_, oldVKey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	newKey := filepath.Join(dir, "keys", "ledger-2.key")
	if err := os.Mkdir(filepath.Dir(newKey), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newKey, []byte("a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, err := RotateKey(before, path, newKey, oldVKey)
	if err != nil {
		t.Fatal(err)
	}
	was, err := members(before)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := members(text)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.key)
		for _, w := range was {
			if w.key == m.key && m.key != "key_file" && compact(t, w.value) != compact(t, m.value) {
				t.Errorf("%s was %s, is %s", w.key, w.value, m.value)
			}
		}
	}
	if got := strings.Join(keys, ","); got != "store_dir,key_file,previous_keys,mediators,max_body_bytes,reader_tokens_sha256,idle_timeout" {
		t.Errorf("after the rotation the members are %s", got)
	}
	cfg, err := Parse(text, path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyFile != newKey || len(cfg.PreviousKeys) != 1 || cfg.PreviousKeys[0] != oldVKey || !bytes.Contains(text, []byte(`"key_file": "keys/ledger-2.key"`)) {
		t.Errorf("after the rotation: key_file %s, previous_keys %v", cfg.KeyFile, cfg.PreviousKeys)
	}
	if again, err := RotateKey(text, path, newKey, oldVKey); err != nil || !bytes.Equal(again, text) {
		t.Errorf("a second rotation: %v\n%s", err, again)
	}

	// The key outside the config's directory: named by its absolute
	// path; the old key listed once, after the keys listed.
	outside := filepath.Join(t.TempDir(), "ledger-3.key")
	if err := os.WriteFile(outside, []byte("a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, otherVKey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	third, err := RotateKey(text, path, outside, otherVKey)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := Parse(third, path); err != nil || cfg.KeyFile != outside || strings.Join(cfg.PreviousKeys, " ") != oldVKey+" "+otherVKey {
		t.Errorf("a rotation to a key outside: %v, %+v", err, cfg)
	}
	if again, err := RotateKey(third, path, outside, oldVKey); err != nil || !bytes.Equal(again, third) {
		t.Errorf("a rotation to the same key listing a listed key: %v\n%s", err, again)
	}

	// Refused, with no text: a key file that does not exist, a bad
	// verifier key, no key_file member, previous_keys not a list or
	// twice (as encoding/json matches names).
	for _, c := range []struct {
		text         []byte
		newKey, vkey string
		want         string
	}{
		{before, filepath.Join(dir, "none.key"), oldVKey, "the changed config would be refused: " + path + ": key_file"},
		{before, newKey, "not a verifier key", "the changed config would be refused: " + path + ": previous_keys[0]"},
		{[]byte(`{"store_dir": "store"}`), newKey, oldVKey, path + ": no member key_file"},
		{[]byte(`{"key_file": "ledger.key", "previous_keys": "x"}`), newKey, oldVKey, path + ": previous_keys"},
		{bytes.Replace(before, []byte(`"key_file"`), []byte(`"previous_keys": [], "Previous_Keys": [], "key_file"`), 1), newKey, oldVKey, path + ": previous_keys appears twice: edit the config by hand"},
	} {
		if changed, err := RotateKey(c.text, path, c.newKey, c.vkey); err == nil || !strings.Contains(err.Error(), c.want) || changed != nil {
			t.Errorf("RotateKey(%s, %s): %v, %d bytes; want %q", c.newKey, c.vkey, err, len(changed), c.want)
		}
	}
}

// A new data directory's config, written by hand: what the operator
// chose and what Load requires, nothing else (every other member has its
// default); listen only when it was given.
func TestNewFile(t *testing.T) {
	const want = `{
  "listen": "127.0.0.1:9443",
  "key_file": "ledger.key",
  "store_dir": "store",
  "mediators": [
    {
      "name": "billing",
      "token_sha256": "%s"
    }
  ]
}
`
	hash := tokenHash("billing-token-example")
	got := NewFile("127.0.0.1:9443", "ledger.key", "store", Mediator{Name: "billing", TokenSHA256: hash})
	if string(got) != strings.Replace(want, "%s", hash, 1) {
		t.Errorf("NewFile:\n%s", got)
	}
	path := handWrittenFile(t, hash, "")
	if cfg, err := Parse(got, path); err != nil || cfg.Listen != "127.0.0.1:9443" || len(cfg.Mediators) != 1 {
		t.Errorf("NewFile's config: %v", err)
	}
	got = NewFile("", "ledger.key", "store", Mediator{Name: "billing", TokenSHA256: hash})
	if want := strings.Replace(want, "  \"listen\": \"127.0.0.1:9443\",\n", "", 1); string(got) != strings.Replace(want, "%s", hash, 1) {
		t.Errorf("NewFile without listen:\n%s", got)
	}
	if cfg, err := Parse(got, path); err != nil || cfg.Listen != DefaultListen {
		t.Errorf("NewFile's config without listen: %v", err)
	}
}
