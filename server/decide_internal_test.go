package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"pgregory.net/rapid"
)

// decidedHead is the decision part of a decide answer as json.Marshal
// wrote it before appendDecidedHead, which must write the same bytes.
type decidedHead struct {
	Decision     entry.Decision `json:"decision"`
	Policies     []string       `json:"policies"`
	PolicyErrors []string       `json:"policy_errors"`
	PolicySet    string         `json:"policy_set"`
}

func nonNilIDs(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// appendDecidedHead writes what json.Marshal wrote, for any strings:
// identifiers, and strings json.Marshal escapes (quotes, backslashes,
// <, >, &, controls, U+2028, invalid UTF-8).
func TestAppendDecidedHead(t *testing.T) {
	text := rapid.OneOf(
		rapid.StringMatching(`[a-z][a-z0-9._-]{0,20}`),
		rapid.String(),
		rapid.SampledFrom([]string{"", `"`, `\`, "<", ">", "&", "\x00", "\x1f", "\u2028", "\u2029", "\xff", "é", "\ufffd", "a<b>&c"}),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) }),
	)
	ids := rapid.OneOf(rapid.Just([]string(nil)), rapid.SliceOf(text))
	rapid.Check(t, func(t *rapid.T) {
		decision := entry.Decision(text.Draw(t, "decision"))
		policies, errored := ids.Draw(t, "policies"), ids.Draw(t, "errored")
		var set commit.Digest
		copy(set[:], rapid.SliceOfN(rapid.Byte(), len(set), len(set)).Draw(t, "set"))
		want, err := json.Marshal(decidedHead{Decision: decision, Policies: nonNilIDs(policies), PolicyErrors: nonNilIDs(errored), PolicySet: set.String()})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want[1:len(want)-1], ',')
		prefix := []byte(`{"x":1,`)
		got := appendDecidedHead(bytes.Clone(prefix), decision, policies, errored, set)
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("got  %s\nwant %s", got[len(prefix):], want)
		}
	})
}

// A decide's head is appended to the answer without allocating.
func TestAppendDecidedHeadAllocates(t *testing.T) {
	var set commit.Digest
	policies, errored := []string{"payments.limit", "payments.known-payee"}, []string{}
	b := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		b = appendDecidedHead(b[:0], entry.NeedsApproval, policies, errored, set)
	}); n != 0 {
		t.Errorf("appendDecidedHead allocates %v times, want 0", n)
	}
}
