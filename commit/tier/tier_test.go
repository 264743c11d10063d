package tier

import (
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// The package doc's example. Its digest was computed from the canonical
// bytes with printf and sha256sum, not by this package:
//
//	(printf 'ledger/v1/tiers\n'; cat tiers.json) | sha256sum
const exampleCanonical = `{"action":"send_email","fields":[{"name":"body","projections":["byte_size"],"tier":"derived"},{"name":"recipient","projections":["recipient_domain"],"tier":"derived"},{"name":"subject","projections":[],"tier":"payload"}]}`
const exampleDigest = "sha256:0609cd081520df9775f115294b8155c38c4f67c665b07a7e7f4504062a969829"

func example() Table {
	// Given out of order: Normalize sorts fields and projections.
	return Table{Action: "send_email", Fields: []Field{
		{Name: "subject", Tier: Payload},
		{Name: "recipient", Tier: Derived, Projections: []string{"recipient_domain"}},
		{Name: "body", Tier: Derived, Projections: []string{"byte_size"}},
	}}
}

func TestExampleDigest(t *testing.T) {
	c, err := example().Canonical()
	if err != nil || string(c) != exampleCanonical {
		t.Fatalf("canonical %s, %v", c, err)
	}
	d, err := example().Digest()
	if err != nil || d.String() != exampleDigest {
		t.Fatalf("digest %s, %v", d, err)
	}
}

// Re-tiering a field changes the applied-tiers digest; the parameter
// digest, computed over the raw parameters before minimization, does not
// depend on the table at all.
func TestRetieringChangesOnlyTheTiersDigest(t *testing.T) {
	params := []byte(`{"recipient":"alice@example.com","subject":"Invoice","body":"Hello"}`)
	before, _ := commit.Params(params)
	d1, _ := example().Digest()
	retiered := example()
	retiered.Fields[0] = Field{Name: "subject", Tier: Derived, Projections: []string{"byte_size"}}
	d2, err := retiered.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1.Equal(d2) {
		t.Fatal("re-tiering kept the applied-tiers digest")
	}
	after, _ := commit.Params(params)
	if !before.Equal(after) {
		t.Fatal("the parameter digest changed")
	}
	// Projection order and field order do not matter.
	shuffled := example()
	shuffled.Fields[0], shuffled.Fields[2] = shuffled.Fields[2], shuffled.Fields[0]
	if d3, _ := shuffled.Digest(); !d3.Equal(d1) {
		t.Fatal("field order changed the digest")
	}
}

func TestNormalizeRefuses(t *testing.T) {
	for name, tbl := range map[string]Table{
		"no action":           {Fields: []Field{{Name: "a", Tier: Policy}}},
		"twice":               {Action: "x", Fields: []Field{{Name: "a", Tier: Policy}, {Name: "a", Tier: Payload}}},
		"unknown tier":        {Action: "x", Fields: []Field{{Name: "a", Tier: "secret"}}},
		"derived, no proj":    {Action: "x", Fields: []Field{{Name: "a", Tier: Derived}}},
		"payload with proj":   {Action: "x", Fields: []Field{{Name: "a", Tier: Payload, Projections: []string{"count"}}}},
		"repeated projection": {Action: "x", Fields: []Field{{Name: "a", Tier: Derived, Projections: []string{"count", "count"}}}},
		"no name":             {Action: "x", Fields: []Field{{Tier: Policy}}},
	} {
		if _, err := tbl.Digest(); err == nil || !strings.HasPrefix(err.Error(), "tier: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
