package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
)

// After a key rotation ledgerctl trusts the set of keys --key, --key-file
// and --trust give, repeated and combined: each entry is checked with the
// key its key_id names. Entry 0 is signed by the old key, entry 1 by the
// new one.
func TestKeySet(t *testing.T) {
	l, err := logtest.New(origin)
	if err != nil {
		t.Fatal(err)
	}
	e := entry.Entry{Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Mediator: "local",
		Principal: "agent:accounts-7", Action: "make_payment", Decision: entry.Allow,
		Params: logtest.Params(`{"amount_minor":1}`), Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`)}
	if _, _, err := l.Append(e); err != nil {
		t.Fatal(err)
	}
	oldKey := l.VerifierKey
	e0, err := entry.Parse(l.Entry(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	newKey := l.VerifierKey
	if _, _, err := l.Append(e); err != nil {
		t.Fatal(err)
	}
	other, err := logtest.New("other.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.ParseUint(strings.TrimPrefix(r.URL.Path, "/v1/entries/"), 10, 64)
		if err != nil || i >= l.Len() {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no such entry"}}`))
			return
		}
		w.Write(l.Entry(i))
	}))
	defer srv.Close()

	dir := t.TempDir()
	for name, text := range map[string]string{
		"old.vkey":   oldKey + "\n",
		"trust.txt":  "# ledger.example.com/log, rotated 2026-12-01\n" + oldKey + "\n\n  " + newKey + "\n",
		"old.txt":    oldKey + "\n",
		"bad.txt":    oldKey + "\nnonsense\n",
		"mixed.txt":  oldKey + "\n" + other.VerifierKey + "\n",
		"empty.txt":  "# no keys\n",
		"other.vkey": other.VerifierKey,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	url := "--url=" + srv.URL
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of standard error, if any
	}{
		{"old entry, new key alone", []string{"get", url, "--key", newKey, "0"}, exitFailed, "signed by key " + e0.KeyID + ", which is not trusted"},
		{"new entry, old key alone", []string{"get", url, "--key", oldKey, "1"}, exitFailed, "which is not trusted"},
		{"old entry, both keys", []string{"get", url, "--key", oldKey, "--key", newKey, "0"}, exitOK, ""},
		{"new entry, both keys", []string{"get", url, "--key", oldKey, "--key", newKey, "1"}, exitOK, ""},
		{"old entry, --key-file and --key", []string{"get", url, "--key-file", "old.vkey", "--key", newKey, "0"}, exitOK, ""},
		{"old entry, --trust", []string{"get", url, "--trust", "trust.txt", "0"}, exitOK, ""},
		{"new entry, --trust", []string{"get", url, "--trust", "trust.txt", "1"}, exitOK, ""},
		{"new entry, --trust and --key", []string{"get", url, "--trust", "old.txt", "--key", newKey, "1"}, exitOK, ""},
		{"new entry, --trust of the old key", []string{"get", url, "--trust", "old.txt", "1"}, exitFailed, "not trusted"},
		{"a bad line", []string{"get", url, "--trust", "bad.txt", "1"}, exitUsage, "--trust bad.txt: line 2: "},
		{"no key in the file", []string{"get", url, "--trust", "empty.txt", "1"}, exitUsage, "no verifier key"},
		{"two logs' keys", []string{"get", url, "--trust", "mixed.txt", "1"}, exitUsage, "a key set holds the keys of one log"},
		{"two logs' keys, by two options", []string{"get", url, "--key", newKey, "--key-file", "other.vkey", "1"}, exitUsage, "a key set holds the keys of one log"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := ledgerctl(t, dir, "", c.args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, want %d; stderr %q, want %q\nstdout: %s", code, c.code, stderr, c.stderr, stdout)
			}
		})
	}
}
