package ledger

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"pgregory.net/rapid"
)

// drawEntry draws an entry of any kind and version, signed, with
// attributes that hold the names scanEntry looks for ("index", "sig",
// "prev" ...) at any depth and strings with escapes, quotes and commas.
func drawEntry(t *rapid.T, k *Key) []byte {
	tricky := rapid.SampledFrom([]string{"index", "sig", "prev", "time", "version", "key_id", "origin", `a"b`, `\`, ",", "}", "{", "é", "x"})
	var value func(depth int) string
	value = func(depth int) string {
		switch n := rapid.IntRange(0, 4).Draw(t, "kind"); {
		case n == 0 || depth > 2:
			return fmt.Sprintf("%d", rapid.IntRange(-5, 1000).Draw(t, "n"))
		case n == 1:
			return fmt.Sprintf("%q", tricky.Draw(t, "s")+tricky.Draw(t, "s"))
		case n == 2:
			return "[" + value(depth+1) + "," + value(depth+1) + "]"
		default:
			return fmt.Sprintf(`{%q:%s,%q:%s}`, tricky.Draw(t, "k"), value(depth+1), "z"+tricky.Draw(t, "k"), value(depth+1))
		}
	}
	attrs := fmt.Sprintf(`{%q:%s,"b":%s}`, tricky.Draw(t, "k"), value(0), value(0))
	c, _ := commit.Params([]byte(`{"to":"a@example.com"}`))
	e := &entry.Entry{Mediator: "mediator-1", Principal: "agent-\"1\"", Action: "send_email", Decision: entry.Allow,
		Policies: []string{"p,1", "p{2}"}, Params: c, Tiers: sha256.Sum256([]byte("t"))}
	switch rapid.IntRange(1, 5).Draw(t, "version") {
	case 2:
		e.Definition = sha256.Sum256([]byte("d"))
	case 3:
		e.Kind, e.PolicySet, e.PolicyErrors = entry.KindDecision, sha256.Sum256([]byte("s")), []string{}
		e.Definition = sha256.Sum256([]byte("d"))
	case 4:
		e = &entry.Entry{Kind: entry.KindPolicySet, PolicySet: sha256.Sum256([]byte("s"))}
	case 5:
		e = &entry.Entry{Kind: entry.KindApproval, ApprovalID: sha256.Sum256([]byte("a")), Request: 3, Approver: "alice",
			Verdict: entry.Approve, PreviewDigest: sha256.Sum256([]byte("p"))}
	}
	if e.Kind != entry.KindPolicySet && e.Kind != entry.KindApproval {
		if err := e.SetAttributes([]byte(attrs)); err != nil {
			t.Skip(err)
		}
	}
	e.Origin, e.KeyID = k.Name(), k.ID()
	e.Index = rapid.Uint64Range(4, 1<<53-1).Draw(t, "index")
	e.Time = time.UnixMicro(rapid.Int64Range(0, 1<<50).Draw(t, "time")).UTC()
	copy(e.Prev[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "prev"))
	m, err := e.SignedMessage()
	if err != nil {
		t.Fatal(err)
	}
	b, err := entry.SignedEntry(m, k.Sign(m))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scanEntry reads what entry.Parse reads, and its entry hash is the hash
// of the message entry.Parse re-encodes, for entries of every kind.
func TestScanEntryAgreesWithParse(t *testing.T) {
	skey, _, _ := GenerateKey("ledger.example.com/scan")
	k, err := ParseKey([]byte(skey), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		b := drawEntry(t, k)
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatalf("the drawn entry does not parse: %v", err)
		}
		head, err := scanEntry(b, sha256.New())
		if err != nil {
			t.Fatalf("scanEntry(%s): %v", b, err)
		}
		hash, _ := e.Hash()
		if head.index != e.Index || head.prev != e.Prev || head.time != e.Time.UnixMicro() || string(head.keyID) != e.KeyID ||
			string(head.origin) != e.Origin || head.hash != hash || head.version != e.Version() {
			t.Fatalf("scanEntry(%s) = %+v, entry.Parse gives %+v", b, head, e)
		}
	})
}

// On any bytes, scanEntry returns an error or a head, never panics; when
// both it and entry.Parse accept the bytes, they agree.
func TestScanEntryHostile(t *testing.T) {
	skey, _, _ := GenerateKey("ledger.example.com/scan")
	k, _ := ParseKey([]byte(skey), KeyOptions{})
	rapid.Check(t, func(t *rapid.T) {
		b := drawEntry(t, k)
		switch rapid.IntRange(0, 2).Draw(t, "change") {
		case 0:
			b = b[:rapid.IntRange(0, len(b)).Draw(t, "cut")]
		case 1:
			for range rapid.IntRange(1, 4).Draw(t, "flips") {
				b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom([]byte(`{}[]",:\0a9 `)).Draw(t, "byte")
			}
		default:
			at := rapid.IntRange(0, len(b)).Draw(t, "at")
			b = append(b[:at:at], append([]byte(rapid.SampledFrom([]string{`,"index":1`, `"`, `\`, `{`, `,`}).Draw(t, "insert")), b[at:]...)...)
		}
		head, err := scanEntry(b, sha256.New())
		if err != nil {
			return
		}
		e, perr := entry.Parse(b)
		if perr != nil {
			return // scanEntry reads less: the leaf hash catches the change
		}
		hash, _ := e.Hash()
		if head.index != e.Index || head.prev != e.Prev || head.hash != hash {
			t.Fatalf("scanEntry(%s) = %+v, entry.Parse gives %+v", b, head, e)
		}
	})
	for _, bad := range []string{``, `{`, `{}`, `{"index":1}`, `{"index":01,"a":1}`, `[1]`, `{"a":"\`, `{"a":{"b":[}`, strings.Repeat("{", 100)} {
		if _, err := scanEntry([]byte(bad), sha256.New()); err == nil {
			t.Errorf("scanEntry(%q) accepted", bad)
		}
	}
	if !bytes.Equal([]byte(separators[entry.Version4]), []byte(entry.SignedDomainSeparatorV4)) {
		t.Fatal("separators")
	}
}
