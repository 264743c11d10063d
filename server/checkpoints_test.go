package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/verify"
)

// Every checkpoint the log signed stays served at /v1/checkpoints/{size},
// byte for byte, and exports and proofs can be made at it: an auditor
// holding an older checkpoint gets a file proved against that very one.
func TestCheckpointsOverTime(t *testing.T) {
	s := startServer(t)
	get := func(path string) (int, []byte, http.Header) {
		t.Helper()
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	_, empty, _ := get("/v1/checkpoint")
	publish := func(n int, from int) []byte {
		for i := from; i < from+n; i++ {
			if resp, b := s.post(t, s.token, apitest.AppendBody(i)); resp.StatusCode != http.StatusCreated {
				t.Fatalf("append: %s", b)
			}
		}
		if _, err := s.l.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, cp, _ := get("/v1/checkpoint")
		return cp
	}
	cp2 := publish(2, 0)
	cp5 := publish(3, 2)
	for size, want := range map[int][]byte{0: empty, 2: cp2, 5: cp5} {
		code, b, h := get(fmt.Sprintf("/v1/checkpoints/%d", size))
		if code != 200 || !bytes.Equal(b, want) {
			t.Errorf("GET /v1/checkpoints/%d: %d\n%s\nwant the checkpoint served when it was the latest:\n%s", size, code, b, want)
		}
		if cc := h.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("GET /v1/checkpoints/%d: Cache-Control %q", size, cc)
		}
	}

	key, err := verify.ParseKey(s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	// An export at the checkpoint of size 2, while the log is at 5.
	code, b, _ := get("/v1/export?start=1&end=2&tree_size=2&consistency_from=0")
	if code != 200 {
		t.Fatalf("export at tree_size=2: %d %s", code, b)
	}
	report, err := verify.VerifyExport(bytes.NewReader(b), key, verify.ExportOptions{})
	if err != nil || report.Checkpoint.Size != 2 || !bytes.Equal(report.Signed, cp2) {
		t.Fatalf("export at tree_size=2: %v, %+v; want it verified at the checkpoint of size 2", err, report)
	}
	// A tlog-proof at it.
	code, b, _ = get("/v1/proofs/1?tree_size=2")
	if code != 200 || !bytes.HasSuffix(b, cp2) {
		t.Fatalf("GET /v1/proofs/1?tree_size=2: %d\n%s\nwant the proof ending with the checkpoint of size 2", code, b)
	}
	if _, cp, err := verify.VerifyTlogProof(b, key); err != nil || cp.Size != 2 {
		t.Fatalf("tlog-proof at size 2: %v", err)
	}
	// The tlog-tiles API is unchanged: it serves the latest checkpoint.
	if code, b, _ := get("/checkpoint"); code != 200 || !bytes.Equal(b, cp5) {
		t.Errorf("GET /checkpoint: %d %s, want the latest", code, b)
	}
}

// With witnesses, /v1/checkpoints/{size} serves the checkpoint with the
// cosignatures held for it, as /v1/checkpoint does, and not as immutable:
// cosignatures may still come.
func TestCheckpointAtCosigned(t *testing.T) {
	s, _ := witnessServer(t, 2)
	size := apitest.AppendN(t, s.url, s.token, s.l, 0, 5)
	cp := apitest.WaitCosignatures(t, s.url, size, 2)
	resp, err := http.Get(fmt.Sprintf("%s/v1/checkpoints/%d", s.url, size))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b, cp) {
		t.Fatalf("GET /v1/checkpoints/%d: %d\n%s\nwant the cosigned checkpoint\n%s", size, resp.StatusCode, b, cp)
	}
	if cc, n := resp.Header.Get("Cache-Control"), resp.Header.Get("Ledger-Cosignatures"); cc != "no-cache" || n != "2" {
		t.Errorf("Cache-Control %q, Ledger-Cosignatures %q; want no-cache and 2", cc, n)
	}
}
