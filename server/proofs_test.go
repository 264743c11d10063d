package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/storage/memory"
)

// Every refusal of a query or path parameter names the parameter, and
// the bound it broke, without repeating what was sent.
func TestParameterErrors(t *testing.T) {
	s := startServer(t)
	for i := range 3 {
		if resp, b := s.post(t, s.token, apitest.AppendBody(i)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %s", b)
		}
		if i == 1 { // checkpoints for sizes 0, 2 and 3; none for 1
			if _, err := s.l.Publish(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	zeros := strings.Repeat("00", 32)
	notSigned := "the log signed no checkpoint for tree_size: it signs one when the tree has grown, at most one per checkpoint_interval, not one per entry; the latest is of size 3 (GET /v1/checkpoint)"
	for _, c := range []struct {
		method, path string
		status       int
		code, want   string
	}{
		{"GET", "/v1/export?start=0&end=3&consistency_from=4", 400, "out_of_range", "consistency_from must not exceed 3, the latest checkpoint's size"},
		{"GET", "/v1/export?start=0&end=4", 400, "out_of_range", "end must not exceed 3, the latest checkpoint's size"},
		{"GET", "/v1/export?start=2&end=1", 400, "out_of_range", "start must not exceed end"},
		{"GET", "/v1/export?end=3", 400, "invalid_request", "start is missing"},
		{"GET", "/v1/export?start=0", 400, "invalid_request", "end is missing"},
		{"GET", "/v1/export?start=0&end=7SECRET", 400, "invalid_request", "end is not a decimal integer"},
		{"GET", "/v1/export?start=0&end=3&consistency_from=01", 400, "invalid_request", "consistency_from is not a decimal integer"},
		{"GET", "/v1/inclusion", 400, "invalid_request", "index or leaf_hash is missing"},
		{"GET", "/v1/inclusion?index=1&leaf_hash=" + zeros, 400, "invalid_request", "give index or leaf_hash, not both"},
		{"GET", "/v1/inclusion?index=3", 400, "out_of_range", "index must be below 3, the latest checkpoint's size"},
		{"GET", "/v1/inclusion?index=2&tree_size=2", 400, "out_of_range", "index must be below tree_size"},
		{"GET", "/v1/inclusion?index=0&tree_size=4", 400, "out_of_range", "tree_size must not exceed 3, the latest checkpoint's size"},
		{"GET", "/v1/inclusion?index=0&tree_size=-1", 400, "invalid_request", "tree_size is not a decimal integer"},
		{"GET", "/v1/inclusion?index=SECRET", 400, "invalid_request", "index is not a decimal integer"},
		{"GET", "/v1/inclusion?leaf_hash=SECRET", 400, "invalid_request", "leaf_hash is not 64 hex digits"},
		{"GET", "/v1/inclusion?leaf_hash=" + zeros, 404, "not_found", "no entry has this leaf_hash in the tree"},
		{"GET", "/v1/consistency", 400, "invalid_request", "size1 is missing"},
		{"GET", "/v1/consistency?size1=4", 400, "out_of_range", "size1 must not exceed 3, the latest checkpoint's size"},
		{"GET", "/v1/consistency?size1=3&tree_size=2", 400, "out_of_range", "size1 must not exceed tree_size"},
		{"GET", "/v1/consistency?size1=1&tree_size=9", 400, "out_of_range", "tree_size must not exceed 3, the latest checkpoint's size"},
		{"GET", "/v1/inclusion?index=0&tree_size=1", 404, "not_found", notSigned},
		{"GET", "/v1/consistency?size1=0&tree_size=1", 404, "not_found", notSigned},
		{"GET", "/v1/export?start=0&end=1&tree_size=1", 404, "not_found", notSigned},
		{"GET", "/v1/export?start=0&end=3&tree_size=2", 400, "out_of_range", "end must not exceed tree_size"},
		{"GET", "/v1/export?start=0&end=2&tree_size=2&consistency_from=3", 400, "out_of_range", "consistency_from must not exceed tree_size"},
		{"GET", "/v1/export?start=0&end=0&tree_size=0", 404, "no_checkpoint", "the checkpoint of tree_size is for the empty log: there is nothing to export"},
		{"GET", "/v1/proofs/1?tree_size=1", 404, "not_found", notSigned},
		{"GET", "/v1/proofs/2?tree_size=2", 404, "not_found", "no entry at this index under the checkpoint of tree_size"},
		{"GET", "/v1/checkpoints/1", 404, "not_found", "the log signed no checkpoint for the size: it signs one when the tree has grown, at most one per checkpoint_interval, not one per entry; the latest is of size 3 (GET /v1/checkpoint)"},
		{"GET", "/v1/checkpoints/12345", 404, "not_found", "the log signed no checkpoint for the size: it signs one when the tree has grown, at most one per checkpoint_interval, not one per entry; the latest is of size 3 (GET /v1/checkpoint)"},
		{"GET", "/v1/checkpoints/01", 400, "invalid_request", "the size is not a decimal integer"},
		{"GET", "/v1/entries/7SECRET", 400, "invalid_request", "the index is not a decimal integer"},
		{"GET", "/v1/entries/12345", 404, "not_found", "no entry at this index"},
		{"GET", "/v1/proofs/12345", 404, "not_found", "no entry at this index under the latest checkpoint"},
		{"POST", "/v1/entries?wait=checkpoints", 400, "invalid_request", "wait: the only value is checkpoint"},
	} {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(apitest.AppendBody(9)))
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error apiError }
		json.Unmarshal(b, &e)
		if resp.StatusCode != c.status || e.Error.Code != c.code || e.Error.Message != c.want {
			t.Errorf("%s %s: %d %s; want %d %s %q", c.method, c.path, resp.StatusCode, b, c.status, c.code, c.want)
		}
		if strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "12345") {
			t.Errorf("%s %s: the refusal repeats what was sent: %s", c.method, c.path, b)
		}
	}
	if s.l.Size() != 3 {
		t.Errorf("size %d after a refused append, want 3", s.l.Size())
	}
}

// A read the store cannot serve is 500 internal, not a 404 that would
// tell an auditor the entry is not in the log.
func TestReadsWhenTheStoreFails(t *testing.T) {
	store := memory.New()
	s := startServerOn(t, nil, store)
	for i := range 3 {
		if resp, b := s.post(t, s.token, apitest.AppendBody(i)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %s", b)
		}
	}
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	store.Close() // every read and write now fails
	for _, path := range []string{"/v1/entries/1", "/v1/proofs/1", "/v1/inclusion?index=1", "/v1/consistency?size1=1", "/tile/0/000.p/3"} {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), `"internal"`) {
			t.Errorf("GET %s with the store failing: %d %s, want 500 internal", path, resp.StatusCode, b)
		}
	}
}
