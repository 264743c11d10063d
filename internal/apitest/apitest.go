// Package apitest holds the helpers that the tests of ledgerd's HTTP API
// (package server), of the daemon (package daemon) and of the command
// (cmd/ledgerd) share: clients of the API's endpoints and their answers,
// the request bodies of the repository's examples, a checker of answers
// against docs/openapi.json, a reader of the metrics page, test
// certificates, a PostgreSQL store, a data directory and a cluster's
// fixture. It is for tests only.
package apitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Root is the repository's root directory: the nearest directory above
// the working directory (a test's package) that holds go.mod.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("apitest: no go.mod above " + dir)
		}
	}
}

var (
	// CorpusDir is the repository's catalog of declarations
	// (testdata/declarations).
	CorpusDir = filepath.Join(Root(), "testdata", "declarations")
	// ReferencePolicies is the reference policy set (testdata/policies).
	ReferencePolicies = filepath.Join(Root(), "testdata", "policies")
)

// LockedBuffer is a bytes.Buffer that goroutines (a server's, a child
// process's copier) write to while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitFor polls cond for up to 10 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitUntil polls ok for up to 20 s.
func WaitUntil(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Get GETs url and returns the body of a 200, "" otherwise.
func Get(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return ""
	}
	return string(b)
}

// GetBody GETs url and returns the status and body.
func GetBody(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// GetJSON GETs url, decodes a 200's body into v, and returns the status.
func GetJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TokenHash is the lower-case hex of token's SHA-256, as a config holds
// a token.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// APIError is the error member of an error answer (docs/api.md): a
// stable code and a message.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Proof is the body of the proof endpoints (GET /v1/inclusion, GET
// /v1/consistency): hashes in standard base64.
type Proof struct {
	Index    *uint64  `json:"index,omitempty"`
	Size1    *uint64  `json:"size1,omitempty"`
	TreeSize uint64   `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

// LogRecord returns the first JSON log line whose msg is msg in log,
// waiting up to 10 s for it: what the test observes of a change (a
// metric, /readyz) may precede the line that logs it.
func LogRecord(t testing.TB, log fmt.Stringer, msg string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		text := log.String()
		for line := range strings.Lines(text) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q in:\n%s", msg, text)
			return nil
		}
	}
}
