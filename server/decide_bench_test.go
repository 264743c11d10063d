package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
)

// BenchmarkHTTPDecideVsAppend compares, in one run on one server with the
// reference catalog and policies, POST /v1/decide (the ledger evaluates
// the reference set, then appends) with POST /v1/entries of the same calls
// carrying the mediator's decision: 64 clients over loopback HTTP. The
// issue's floor is decide ≥ 85% of append throughput; bench/decide-wrk.sh
// measures the same with wrk in a separate process.
func BenchmarkHTTPDecideVsAppend(b *testing.B) {
	s := policyServer(b, apitest.ReferencePolicies)
	decls, err := referencecalls.Declarations(apitest.CorpusDir)
	if err != nil {
		b.Fatal(err)
	}
	var decide, appendBodies []string
	for i, c := range referencecalls.Table() {
		c.Principal = fmt.Sprintf("agent-%d", i)
		res, err := referencecalls.Minimize(decls, c)
		if err != nil {
			b.Fatal(err)
		}
		body := apitest.DecideRequestBody(c.Principal, c.Action, res)
		decide = append(decide, body)
		policies := `"policies":["` + strings.Join(c.Determining, `","`) + `"],`
		if len(c.Determining) == 0 {
			policies = `"policies":[],`
		}
		appendBodies = append(appendBodies, `{"decision":"`+string(c.Decision)+`",`+policies+body[1:])
	}
	for _, bc := range []struct {
		path   string
		bodies []string
	}{{"/v1/entries", appendBodies}, {"/v1/decide", decide}} {
		b.Run(strings.TrimPrefix(bc.path, "/v1/"), func(b *testing.B) {
			benchmarkPost(b, s.url+bc.path, s.token, bc.bodies, "requests/s")
		})
	}
	// The floor: the same clients and bodies against a bare net/http
	// server whose handler reads the body and answers 201 with a body the
	// size of a receipt. What the two above cost beyond it is the
	// ledger's server: checks, decision, signing, the durable append.
	b.Run("bare-net-http", func(b *testing.B) {
		answer := []byte(`{"index":1,"leaf_hash":"` + strings.Repeat("0", 64) + `","entry":{` + strings.Repeat(" ", 1000) + "}}\n")
		bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write(answer)
		}))
		defer bare.Close()
		benchmarkPost(b, bare.URL+"/v1/entries", s.token, appendBodies, "requests/s")
	})
}
