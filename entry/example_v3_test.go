package entry_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
)

// The version 3 worked examples of docs/entry.md §4: a publication of the
// reference policy set and a decision the ledger made with it. Their
// hashes are those the document gives, they verify under the
// documentation key, re-signing reproduces their bytes, and the decision
// is exactly what the reference policies decide for its attributes,
// checked against the reference declaration of make_payment.
func TestExampleVersion3Entries(t *testing.T) {
	seed := sha256.Sum256([]byte("decision ledger documentation key: never use it for anything real"))
	key := ed25519.NewKeyFromSeed(seed[:])
	const keyID = "ledger.example.com/log+cf212548"
	for _, tc := range []struct{ file, hash, leaf string }{
		{"example-v3-policy-set.json", "sha256:a42b1ac213dc646bd3b72f1f531b984d6fe3e329c8e84f645c35aacb3a497089", "4e2b9d7fe01c0be2fc8c5824a7e2edfebad2b49057b829ad609b464c0bf8281c"},
		{"example-v3-decision.json", "sha256:fc6c885dca0cb30097c9e04860b703f08478a880dc806fece3762f715e471217", "924984f13d2cf56b83a8396a0813447f825c42c70d0c42dd1fad4e5741daffc6"},
	} {
		b, err := os.ReadFile("../testdata/entry/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if err := e.Verify(keyID, key.Public().(ed25519.PublicKey)); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if h, err := e.Hash(); err != nil || h.String() != tc.hash {
			t.Errorf("%s: hash %s, %v", tc.file, h, err)
		}
		if lh := entry.LeafHash(b); hex.EncodeToString(lh[:]) != tc.leaf {
			t.Errorf("%s: leaf hash %x", tc.file, lh)
		}
		again := *e
		again.Signature = nil
		if _, err := again.Sign(keyID, func(m []byte) []byte { return ed25519.Sign(key, m) }); err != nil {
			t.Fatal(err)
		}
		if out, _ := again.Marshal(); !bytes.Equal(out, b) {
			t.Errorf("%s: re-signed entry differs", tc.file)
		}
	}

	var decls []*declare.Declaration
	var payment *declare.Declaration
	for _, name := range []string{"http_request", "make_payment", "read_record", "send_email", "upload_file"} {
		b, err := os.ReadFile("../testdata/declarations/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		d, err := declare.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, d)
		if name == "make_payment" {
			payment = d
		}
	}
	set, err := policy.Load("../testdata/policies", decls)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := os.ReadFile("../testdata/entry/example-v3-policy-set.json")
	db, _ := os.ReadFile("../testdata/entry/example-v3-decision.json")
	pub, _ := entry.Parse(pb)
	dec, _ := entry.Parse(db)
	if pub.PolicySet != set.Digest() || dec.PolicySet != set.Digest() {
		t.Errorf("the examples name %v and %v, the reference set is %v", pub.PolicySet, dec.PolicySet, set.Digest())
	}
	if h, _ := pub.Hash(); dec.Prev != h || dec.Index != pub.Index+1 {
		t.Error("the decision does not follow the publication")
	}
	def, _ := payment.Digest()
	tiers, _ := payment.TiersDigest()
	params, _ := commit.Params([]byte(`{"amount_minor":1250000,"currency":"EUR","memo":"Invoice 2026-1142","payee":"Café Exemple SARL"}`))
	if dec.Definition != def || dec.Tiers != tiers || !dec.Params.Equal(params) {
		t.Errorf("the decision's definition, tiers or parameters are not the reference declaration's")
	}
	r := set.Decide(dec.Principal, dec.Action, dec.Attributes)
	if r.Invalid != nil || r.Decision != dec.Decision || !slices.Equal(r.Determining, dec.Policies) || !slices.Equal(r.Errored, dec.PolicyErrors) {
		t.Errorf("replayed %+v, recorded %s %v %v", r, dec.Decision, dec.Policies, dec.PolicyErrors)
	}
}
