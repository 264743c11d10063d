package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

// newFileIn writes the config a first start writes (NewFile, no listen)
// beside handWrittenFile's key and store, and returns its path and text.
func newFileIn(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(filepath.Dir(handWrittenFile(t, tokenHash("other-token-example"), "")), "ledgerd.json")
	text := NewFile("", "ledger.key", "store", Mediator{Name: "local", TokenSHA256: tokenHash("local-token-example")})
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, text
}

// The minimal file a first start writes, hand-written, and what setting
// members makes of it: each new member goes after those before it in
// Config's order, a path beneath the file's directory is written
// relative to it, a member set again keeps its place.
func TestSetMember(t *testing.T) {
	path, text := newFileIn(t)
	dir := filepath.Dir(path)
	if err := os.Mkdir(filepath.Join(dir, "declarations"), 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	for _, set := range [][2]string{
		{"max_body_bytes", "65536"},
		{"listen", "127.0.0.1:9443"},
		{"catalog_dir", filepath.Join(dir, "declarations")},
		{"checkpoint_interval", "1s"},
		{"listen", "127.0.0.1:9444"},
	} {
		if text, err = SetMember(text, path, set[0], set[1]); err != nil {
			t.Fatalf("SetMember(%s, %s): %v", set[0], set[1], err)
		}
	}
	want := `{
  "listen": "127.0.0.1:9444",
  "key_file": "ledger.key",
  "store_dir": "store",
  "mediators": [
    {
      "name": "local",
      "token_sha256": "` + tokenHash("local-token-example") + `"
    }
  ],
  "checkpoint_interval": "1s",
  "max_body_bytes": 65536,
  "catalog_dir": "declarations"
}
`
	if string(text) != want {
		t.Errorf("after the sets:\n%s\nwant:\n%s", text, want)
	}
	again, err := SetMember(text, path, "listen", "127.0.0.1:9444")
	if err != nil || &again[0] != &text[0] {
		t.Errorf("setting a member to its value again: %v, a new text", err)
	}
	for _, unset := range []string{"catalog_dir", "listen", "max_body_bytes", "checkpoint_interval"} {
		if text, err = UnsetMember(text, path, unset); err != nil {
			t.Fatalf("UnsetMember(%s): %v", unset, err)
		}
	}
	if minimal := NewFile("", "ledger.key", "store", Mediator{Name: "local", TokenSHA256: tokenHash("local-token-example")}); string(text) != string(minimal) {
		t.Errorf("unset every member set: \n%s\nwant the first start's file:\n%s", text, minimal)
	}
	if same, err := UnsetMember(text, path, "listen"); err != nil || string(same) != string(text) {
		t.Errorf("unsetting a member the file lacks: %v, %s", err, same)
	}
	if cfg, err := Parse(text, path); err != nil || cfg.Listen != DefaultListen {
		t.Errorf("after unset: %v", err)
	}
}

// On an operator's file, a set changes one member's value and nothing
// else: every other member keeps its place, its spelling and its value.
func TestSetMemberKeepsTheRest(t *testing.T) {
	path := handWrittenFile(t, tokenHash("local-token-example"), "")
	before := readFile(t, path)
	text, err := SetMember(before, path, "idle_timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	keptMembers(t, before, text, []string{"idle_timeout"})
	text, err = SetMember(text, path, "witness_interval", "2s")
	if err != nil {
		t.Fatal(err)
	}
	keptMembers(t, before, text, []string{"idle_timeout"}, "witness_interval")
	if cfg, err := Parse(text, path); err != nil || cfg.IdleTimeout != "30s" || cfg.WitnessInterval != "2s" || cfg.MaxBodyBytes != 65536 {
		t.Errorf("after the sets: %+v, %v", cfg, err)
	}
}

// A set or unset that cannot be made is refused, with no text: a name
// that is no member (with the nearest one), a member that is not a
// scalar or is key_file (with the command that changes it), an integer
// not in decimal, a value the config's checks refuse, a required member
// unset.
func TestSetMemberRefusals(t *testing.T) {
	path, text := newFileIn(t)
	for _, c := range []struct {
		name, value string // value "-": unset
		want        string
	}{
		{"lisen", "127.0.0.1:9443", `no member "lisen" in the config: did you mean "listen"?`},
		{"catalog", "/x", `did you mean "catalog_dir"?`},
		{"Listen", "127.0.0.1:9443", `did you mean "listen"?`},
		{"mediator", "x", `no member "mediator" in the config: did you mean "mediators"?`},
		{"mediators", "[]", `mediators is not a member ledgerd config sets: "ledgerd token add" and "ledgerd token rotate" change it`},
		{"tls", "-", "tls is not a member ledgerd config sets: edit the file by hand"},
		{"key_file", "other.key", `"ledgerd key rotate" changes it`},
		{"key_file", "-", `"ledgerd key rotate" changes it`},
		{"max_body_bytes", "64k", "max_body_bytes: the value is not an integer in decimal (such as 262144)"},
		{"max_body_bytes", "+5", "not an integer in decimal"},
		{"max_body_bytes", "05", "not an integer in decimal"},
		{"max_body_bytes", "-1", "max_body_bytes -1 is out of range"},
		{"checkpoint_interval", "fast", `the changed config would be refused: ` + path + `: checkpoint_interval "fast" is not a positive duration`},
		{"listen", "8080", `listen "8080" is not host:port`},
		{"listen", "", `listen: the value is empty: "ledgerd config unset listen" gives it its default`},
		{"policy_dir", filepath.Dir(path), "policy_dir needs catalog_dir"},
		{"catalog_dir", filepath.Join(filepath.Dir(path), "none"), "catalog_dir " + filepath.Join(filepath.Dir(path), "none") + " does not exist"},
		{"store_dir", "-", "store_dir is required"},
	} {
		var got []byte
		var err error
		if c.value == "-" {
			got, err = UnsetMember(text, path, c.name)
		} else {
			got, err = SetMember(text, path, c.name, c.value)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || got != nil {
			t.Errorf("%s %q: %v, %d bytes; want %q", c.name, c.value, err, len(got), c.want)
		}
	}
	var unknown *UnknownMemberError
	if _, err := SetMember(text, path, "max_bodybytes", "1"); !errors.As(err, &unknown) || unknown.Nearest != "max_body_bytes" {
		t.Errorf("an unknown name: %v", err)
	}
	var other *NotSettableError
	if _, err := UnsetMember(text, path, "approvals"); !errors.As(err, &other) || other.Name != "approvals" {
		t.Errorf("a member not set here: %v", err)
	}
	if _, err := SetMember([]byte("[]"), path, "listen", "127.0.0.1:9443"); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("a file that is no object: %v", err)
	}
}

// A config the checks refuse can be set right: set needs only a JSON
// object, and a valid result.
func TestSetMemberRepairs(t *testing.T) {
	path, text := newFileIn(t)
	broken := []byte(strings.Replace(string(text), "{\n", "{\n  \"listen\": \"8080\",\n", 1))
	if _, err := Parse(broken, path); err == nil {
		t.Fatal("the broken config parses")
	}
	fixed, err := SetMember(broken, path, "listen", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := Parse(fixed, path); err != nil || cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("the set config: %v", err)
	}
}

// get's values: the file's text, the store URL's password redacted;
// unset members have their defaults, derived ones from the config.
func TestMemberTextAndDefault(t *testing.T) {
	path, text := newFileIn(t)
	text = []byte(strings.Replace(string(text), "{\n", "{\n  \"store\": \"postgres://ledger:hunter2@db.example.com/ledger\",\n  \"max_body_bytes\": 65536,\n  \"key_name\": null,\n", 1))
	for name, want := range map[string]string{"store": "postgres://ledger:xxxxx@db.example.com/ledger", "max_body_bytes": "65536", "key_file": "ledger.key"} {
		if got, ok, err := MemberText(text, name); err != nil || !ok || got != want {
			t.Errorf("MemberText(%s) = %q, %v, %v; want %q", name, got, ok, err, want)
		}
	}
	for _, name := range []string{"listen", "key_name", "catalog_dir"} {
		if got, ok, err := MemberText(text, name); err != nil || ok {
			t.Errorf("MemberText(%s) of a member not set = %q, %v, %v", name, got, ok, err)
		}
	}
	if _, _, err := MemberText(text, "mediators"); err == nil {
		t.Error("MemberText of a list")
	}
	cfg, err := Parse(text, path)
	if err != nil {
		t.Fatal(err)
	}
	maxConns, _, _ := cfg.ConnectionCaps()
	for name, want := range map[string]string{
		"listen": DefaultListen, "checkpoint_interval": ledger.DefaultCheckpointInterval.String(), "min_commit_interval": "1ms",
		"max_body_bytes": "262144", "idle_timeout": "60s", "body_timeout": "30s", "write_timeout": "60s",
		"witness_interval": "1s", "witnesses_needed": "0", "max_connections": strconv.Itoa(maxConns),
	} {
		if got, ok, _ := cfg.Default(name); !ok || got != want {
			t.Errorf("Default(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
	// On PostgreSQL, no per-source cap.
	if got, ok, means := cfg.Default("max_connections_per_source"); ok || means != "no cap" {
		t.Errorf("Default(max_connections_per_source) = %q, %v, %q", got, ok, means)
	}
	for _, name := range []string{"store", "catalog_dir", "policy_dir", "tiles_prefix", "key_name"} {
		if _, ok, means := cfg.Default(name); ok || means == "" {
			t.Errorf("Default(%s) has a value or says nothing: %q", name, means)
		}
	}
	// Every scalar member's default is known.
	for _, name := range ScalarMembers() {
		if _, ok, means := cfg.Default(name); !ok && means == "" {
			t.Errorf("Default(%s) says nothing", name)
		}
	}
}

// The scalar members are the top-level strings and integers, in
// Config's order, written out by hand.
func TestScalarMembers(t *testing.T) {
	want := "listen,key_file,key_name,store_dir,store,checkpoint_interval,min_commit_interval,max_body_bytes," +
		"tiles_prefix,idle_timeout,body_timeout,write_timeout,max_connections,max_connections_per_source," +
		"catalog_dir,policy_dir,witnesses_needed,witness_interval"
	if got := strings.Join(ScalarMembers(), ","); got != want {
		t.Errorf("ScalarMembers() = %s\nwant %s", got, want)
	}
}

// Every change "ledgerd token", "ledgerd approver" and "ledgerd key
// rotate" makes works on the minimal file a first start writes, which
// lacks every optional member.
func TestChangesOnNewFile(t *testing.T) {
	path, text := newFileIn(t)
	added, err := AddMediatorToken(text, path, "billing", tokenHash("billing-token-example"))
	if err != nil {
		t.Fatalf("token add: %v", err)
	}
	if _, _, err := RotateMediatorToken(added, path, "local", tokenHash("local-token-2-example"), time.Hour, time.Now()); err != nil {
		t.Errorf("token rotate --overlap: %v", err)
	}
	withAlice, err := AddApprover(text, path, testApprover(t, "alice", "send_email"))
	if err != nil {
		t.Fatalf("approver add: %v", err)
	}
	if cfg, err := Parse(withAlice, path); err != nil || cfg.Approvals == nil || len(cfg.Approvals.Approvers) != 1 {
		t.Errorf("approver add: %v", err)
	}
	if _, err := RemoveApprover(withAlice, path, "alice"); err != nil {
		t.Errorf("approver remove: %v", err)
	}
	_, oldVKey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	newKey := filepath.Join(filepath.Dir(path), "ledger-2.key")
	if err := os.WriteFile(newKey, []byte("a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rotated, err := RotateKey(text, path, newKey, oldVKey)
	if err != nil {
		t.Fatalf("key rotate: %v", err)
	}
	if cfg, err := Parse(rotated, path); err != nil || cfg.KeyFile != newKey || len(cfg.PreviousKeys) != 1 {
		t.Errorf("key rotate: %v", err)
	}
}

// docs/config.md "Changing the config" names the members ledgerd config
// reads and changes: exactly ScalarMembers, in order.
func TestConfigDocScalarMembers(t *testing.T) {
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Changing the config: `ledgerd config`\n")
	_, list, _ := strings.Cut(section, "members by name: ")
	list, _, _ = strings.Cut(list, ".\n")
	var names []string
	for _, item := range strings.Split(list, ",") {
		names = append(names, strings.Trim(strings.TrimSpace(item), "`"))
	}
	if got, want := strings.Join(names, ","), strings.Join(ScalarMembers(), ","); got != want {
		t.Errorf("%s lists the members %s\nwant %s", configDocPath, got, want)
	}
}

// Any value SetMember takes reads back exactly, and unsetting it again
// gives back the text it was set in (key_name: a string the config's
// checks leave to the key).
func FuzzSetMember(f *testing.F) {
	for _, v := range []string{"ledger.example.com/log", `a "quoted" <name> & \\ back`, "\u2028", "\x00", "\xff"} {
		f.Add(v)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte("a key\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		f.Fatal(err)
	}
	text := NewFile("", "ledger.key", "store", Mediator{Name: "local", TokenSHA256: tokenHash("local-token-example")})
	f.Fuzz(func(t *testing.T, value string) {
		set, err := SetMember(text, path, "key_name", value)
		if err != nil {
			return
		}
		if got, ok, err := MemberText(set, "key_name"); err != nil || !ok || got != value {
			t.Fatalf("set %q, read back %q, %v, %v", value, got, ok, err)
		}
		if cfg, err := Parse(set, path); err != nil || cfg.KeyName != value {
			t.Fatalf("set %q, parsed %v", value, err)
		}
		if back, err := UnsetMember(set, path, "key_name"); err != nil || string(back) != string(text) {
			t.Fatalf("unset after set %q: %v\n%s", value, err, back)
		}
	})
}
