package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// exportFrames splits an export file into its frames' tags and payloads.
func exportFrames(t *testing.T, b []byte) (tags []string, payloads [][]byte) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte(ledger.ExportHeader)) {
		t.Fatal("no export header")
	}
	b = b[len(ledger.ExportHeader):]
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		tag, lenText, ok2 := strings.Cut(string(line), " ")
		n, err := strconv.Atoi(lenText)
		if !ok || !ok2 || err != nil || len(rest) < n+1 || rest[n] != '\n' {
			t.Fatalf("malformed frame after %v", tags)
		}
		tags, payloads = append(tags, tag), append(payloads, rest[:n])
		b = rest[n+1:]
	}
	return tags, payloads
}

// hostileAttributes hold members spelled like an entry's policy_set, at
// the top of the attributes and nested, naming a set no entry names.
func hostileAttributes(decoy commit.Digest) []byte {
	return fmt.Appendf(nil, `{"a":1,"policy_set":%q,"x":{"b":1,"policy_set":%q,"version":3},"z":",\"policy_set\":\"%s\""}`, decoy, decoy, decoy)
}

// policyLog is a log of publications and ledger decisions naming two
// sets, with mediator-decided entries between them whose attributes hold
// a decoy policy_set member. bundles maps each digest to its bundle.
func policyLog(t *testing.T) (l *ledger.Ledger, bundles map[commit.Digest][]byte, d1, d2, decoy commit.Digest) {
	t.Helper()
	ctx := context.Background()
	l = openTest(t, memory.New(), testKey(t))
	t.Cleanup(func() { l.Close() })
	bundles = map[commit.Digest][]byte{}
	for _, text := range []string{"bundle one", "bundle two", "decoy"} {
		b := []byte("ledger/v1/policies\n" + text)
		bundles[sha256.Sum256(b)] = b
	}
	d1 = sha256.Sum256([]byte("ledger/v1/policies\nbundle one"))
	d2 = sha256.Sum256([]byte("ledger/v1/policies\nbundle two"))
	decoy = sha256.Sum256([]byte("ledger/v1/policies\ndecoy"))
	decision := func(i int, set commit.Digest) ledger.Record {
		r := testRecord(t, i)
		r.Kind, r.PolicySet, r.Definition = entry.KindDecision, set, sha256.Sum256([]byte("definition"))
		r.Attributes = hostileAttributes(decoy)
		return r
	}
	mediator := testRecord(t, 0)
	mediator.Attributes = hostileAttributes(decoy)
	for _, r := range []ledger.Record{
		mediator, // 0
		{Kind: entry.KindPolicySet, PolicySet: d1}, // 1
		decision(2, d1), // 2
		mediator,        // 3
		{Kind: entry.KindPolicySet, PolicySet: d2}, // 4
		decision(5, d2), // 5
		decision(6, d1), // 6
		mediator,        // 7
	} {
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	return l, bundles, d1, d2, decoy
}

// Export writes one policy-set frame per distinct set the range's
// version 3 entries name, in order of first appearance, after the entries
// and before the end frame; never for a member inside attributes.
func TestExportPolicySets(t *testing.T) {
	ctx := context.Background()
	l, bundles, d1, d2, _ := policyLog(t)
	var asked []commit.Digest
	opts := ledger.ExportOptions{PolicySet: func(_ context.Context, d commit.Digest) ([]byte, error) {
		asked = append(asked, d)
		return bundles[d], nil
	}}
	for _, c := range []struct {
		start, end uint64
		want       []commit.Digest
	}{
		{0, 8, []commit.Digest{d1, d2}},
		{4, 8, []commit.Digest{d2, d1}},
		{2, 4, []commit.Digest{d1}},
		{6, 7, []commit.Digest{d1}},
		{7, 8, nil},
		{0, 1, nil},
		{3, 3, nil},
	} {
		asked = nil
		var buf bytes.Buffer
		if err := l.Export(ctx, &buf, c.start, c.end, opts); err != nil {
			t.Fatalf("[%d, %d): %v", c.start, c.end, err)
		}
		tags, payloads := exportFrames(t, buf.Bytes())
		var got []commit.Digest
		for i, tag := range tags {
			if tag == "policy-set" {
				got = append(got, sha256.Sum256(payloads[i]))
			}
		}
		// The frames stand after the last entry frame, before the end.
		wantTail := []string{"entry"}
		if c.start == c.end {
			wantTail = nil
		}
		for range c.want {
			wantTail = append(wantTail, "policy-set")
		}
		wantTail = append(wantTail, "end")
		if tail := tags[len(tags)-len(wantTail):]; fmt.Sprint(tail) != fmt.Sprint(wantTail) {
			t.Errorf("[%d, %d): frames end %v, want %v", c.start, c.end, tail, wantTail)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || fmt.Sprint(asked) != fmt.Sprint(c.want) {
			t.Errorf("[%d, %d): frames for %v, asked for %v, want %v", c.start, c.end, got, asked, c.want)
		}

		// Without PolicySet the file is the one the format had before.
		var plain bytes.Buffer
		if err := l.Export(ctx, &plain, c.start, c.end, ledger.ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		tags, _ = exportFrames(t, plain.Bytes())
		for _, tag := range tags {
			if tag == "policy-set" {
				t.Errorf("[%d, %d): a policy-set frame without PolicySet", c.start, c.end)
			}
		}
	}
}

// A failing PolicySet, or a bundle with another digest or beyond the
// bound, fails the export, and the file written has no end frame.
func TestExportPolicySetErrors(t *testing.T) {
	ctx := context.Background()
	l, bundles, _, d2, _ := policyLog(t)
	archiveDown := errors.New("archive down")
	for name, get := range map[string]func(commit.Digest) ([]byte, error){
		"error":          func(commit.Digest) ([]byte, error) { return nil, archiveDown },
		"another digest": func(d commit.Digest) ([]byte, error) { return bundles[d2], nil },
		"too long": func(d commit.Digest) ([]byte, error) {
			return make([]byte, ledger.MaxPolicySetFrame+1), nil
		},
	} {
		var buf bytes.Buffer
		err := l.Export(ctx, &buf, 0, 8, ledger.ExportOptions{PolicySet: func(_ context.Context, d commit.Digest) ([]byte, error) { return get(d) }})
		if err == nil {
			t.Errorf("%s: export succeeded", name)
			continue
		}
		if name == "error" && !errors.Is(err, archiveDown) {
			t.Errorf("%s: %v does not wrap the archive's error", name, err)
		}
		if bytes.Contains(buf.Bytes(), []byte("\nend 0\n")) {
			t.Errorf("%s: the failed export has an end frame", name)
		}
	}
}

// policySetOf agrees with entry.Parse on every entry of the log, and on
// version 3 entries whose attributes hold decoys.
func TestPolicySetOf(t *testing.T) {
	ctx := context.Background()
	l, _, _, _, decoy := policyLog(t)
	for i := range uint64(8) {
		b, err := l.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		d, ok, err := ledger.PolicySetOf(b)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (e.Version() == entry.Version3) || d != e.PolicySet || d == decoy {
			t.Errorf("entry %d: policySetOf = %v, %v; entry names %v (version %d)", i, d, ok, e.PolicySet, e.Version())
		}
	}
}
