package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/verify"
)

// Each kind of consistency failure gets its own hint; only those a proof
// can fix name consistency_from.
func TestConsistencyHints(t *testing.T) {
	for _, c := range []struct {
		name string
		ce   verify.ConsistencyError
		want string
	}{
		{"no proof", verify.ConsistencyError{TrustedSize: 600, Size: 1200, Start: 0, End: 1200},
			"ledger-verify: hint: ask ledgerd for /v1/export?start=0&end=1200&consistency_from=600: consistency_from=600 is your trusted checkpoint's tree size\n"},
		{"proof from another size", verify.ConsistencyError{TrustedSize: 600, Size: 1200, Start: 700, End: 800, HasProof: true, ProofFrom: 500},
			"ledger-verify: hint: ask ledgerd for /v1/export?start=700&end=800&consistency_from=600: "},
		{"proof fails", verify.ConsistencyError{TrustedSize: 600, Size: 1200, Start: 700, End: 800, HasProof: true, ProofFrom: 600},
			"ledger-verify: hint: the proof from tree size 600 does not verify: if a fresh /v1/export?start=700&end=800&consistency_from=600 fails too, the log forked"},
		{"fork", verify.ConsistencyError{TrustedSize: 1200, Size: 1200, Start: 0, End: 1200},
			"ledger-verify: hint: two checkpoints signed for tree size 1200 with different roots are evidence that the log forked: keep both files\n"},
		{"older export", verify.ConsistencyError{TrustedSize: 1500, Size: 1200, Start: 0, End: 1200},
			"ledger-verify: hint: this export was made at a checkpoint older than the trusted one: verify one made later (ledgerd serves /v1/export?start=0&end=1200&consistency_from=1500 at its latest checkpoint)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.ce.Err = errors.New("failed")
			var b bytes.Buffer
			hints(&b, &verify.Failure{Index: verify.NoIndex, Part: "consistency proof", Check: verify.CheckConsistency, Err: &c.ce})
			if !strings.HasPrefix(b.String(), c.want) {
				t.Errorf("got %q\nwant %q...", b.String(), c.want)
			}
		})
	}
}
