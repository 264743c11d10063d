package declare

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// The dictionary attack of docs/commitment.md §7.1, run. A payment's
// amount and currency are recorded raw, and its payee_known attribute
// says the payee is on the allowlist: whoever holds the log and the list
// (10^5 payees) rebuilds each candidate call and hashes it.
//
// Against a version 1 entry the search recovers the raw parameters: the
// digest is a public function of them.
//
// Against a version 2 entry it finds nothing, and cannot: each field's
// commitment is HMAC-SHA256 keyed by a 32-byte opening drawn at random and
// never written to the log, a pseudorandom function of the value under a
// key the searcher lacks. Testing one candidate means guessing that key,
// 2^256 tries, whatever the dictionary; the digest over the map of field
// commitments inherits it. The search below tries every opening a
// searcher could know (none, zeros, one derived from the candidate
// itself) so that it would succeed if the construction ignored or
// leaked the opening; and the size, the map's length, is the same for
// every candidate, so it narrows nothing either.
func TestDictionaryAttack(t *testing.T) {
	file, err := os.ReadFile("../../testdata/declarations/make_payment.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	const candidates = 100_000
	payees := make([]string, candidates)
	list := map[string]bool{}
	for i := range payees {
		payees[i] = fmt.Sprintf("payee-%d", i) // of 7 to 11 characters
		list[payees[i]] = true
	}
	opts := Options{Allowlists: map[string]map[string]bool{"payees": list}}
	call := func(payee string) []byte {
		return fmt.Appendf(nil, `{"amount_minor":42000,"currency":"EUR","payee":%q}`, payee)
	}
	secret := payees[73519]
	v1, err := d.Minimize(call(secret), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Openings = commit.RandomOpenings()
	v2, err := d.Minimize(call(secret), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v1.Attributes, []byte(`{"amount_minor":42000,"currency":"EUR","payee":{"payee_known":true}}`)) || !bytes.Equal(v1.Attributes, v2.Attributes) {
		t.Fatalf("recorded attributes %s / %s", v1.Attributes, v2.Attributes)
	}

	// Version 1: hash each candidate, compare.
	var recovered []string
	for _, p := range payees {
		if c, err := commit.Params(call(p)); err == nil && c.Equal(v1.Params) {
			recovered = append(recovered, p)
		}
	}
	if len(recovered) != 1 || recovered[0] != secret {
		t.Fatalf("version 1: the search recovered %v, want exactly the payee", recovered)
	}

	// Version 2: every opening the searcher could know, for every candidate,
	// of every length.
	guesses := func(payee string) []commit.OpeningSource {
		derived := commit.Opening(sha256.Sum256([]byte(payee)))
		return []commit.OpeningSource{constOpening{}, constOpening(derived)}
	}
	found := 0
	for _, p := range payees {
		for _, g := range guesses(p) {
			c, _, err := commit.Hide(call(p), g)
			if err != nil {
				t.Fatal(err)
			}
			if c.Digest == v2.Params.Digest {
				found++
			}
			if c.Size != v2.Params.Size {
				t.Fatalf("version 2: candidate %s commits with size %d, the entry's is %d: the size would narrow the search", p, c.Size, v2.Params.Size)
			}
		}
	}
	if found != 0 {
		t.Fatalf("version 2: the search matched %d candidates", found)
	}
	// The entry's own openings do open it: the search above failed for
	// want of them, not because the commitment is of something else.
	if again, _, err := commit.Hide(call(secret), v2.Disclosure); err != nil || !again.Equal(v2.Params) {
		t.Fatalf("the entry's own openings: %v", err)
	}
	t.Logf("version 1: %d candidates searched, the payee recovered; version 2: %d candidates × %d openings, nothing", candidates, candidates, len(guesses("")))
}

type constOpening commit.Opening

func (c constOpening) Opening(string) (commit.Opening, error) { return commit.Opening(c), nil }
