package server

import (
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// Decoding an append body allocates what parsing it does and one value
// for each string, list and the attributes it takes out, and nothing to
// check its member names.
func TestDecodeAppendRequestAllocations(t *testing.T) {
	body := []byte(`{"principal":"agent-7","action":"make_payment","decision":"allow","policies":["payments.limit"],` +
		`"params_digest":"sha256:00000000000000000000000000000000000000000000000000000000075bcd15","params_size":64,` +
		`"tiers_digest":"sha256:0609cd08e13b2f4b07d5f0e3a86b4f7a4c9cbe2b4b8d4f4f3a4f8d0b3e2c9829",` +
		`"attributes":{"amount_minor":123456789,"currency":"EUR","payee_known":true,"memo_size":201,` +
		`"recipient":{"recipient_domain":"example.com"},"route":"/v1/payments/{id}","note":"` + strings.Repeat("x", 120) + `"}}`)
	parse := testing.AllocsPerRun(100, func() {
		if _, err := (commit.Domain{}).Object(body); err != nil {
			t.Fatal(err)
		}
	})
	decode := testing.AllocsPerRun(100, func() {
		if _, problem := decodeAppendRequest(body); problem != "" {
			t.Fatal(problem)
		}
	})
	// principal, action, decision, params_digest, tiers_digest; the
	// policies' list and its one id; the attributes' canonical form.
	const values = 5 + 2 + 1
	if decode > parse+values {
		t.Errorf("decoding allocates %v times, parsing %v: more than one for each of the %d values taken out", decode, parse, values)
	}
}
