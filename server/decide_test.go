package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/verify"
)

// checkDecided checks that a decide answer is the entry it carries: a
// version 3 ledger decision with the answer's decision, ids and set.
func checkDecided(t testing.TB, d apitest.Decided) *entry.Entry {
	t.Helper()
	e, err := entry.Parse(d.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if e.Version() != entry.Version3 || e.Kind != entry.KindDecision || e.Index != d.Index ||
		e.Decision != d.Decision || !slices.Equal(e.Policies, d.Policies) ||
		!slices.Equal(nonNilIDs(e.PolicyErrors), d.PolicyErrors) || e.PolicySet.String() != d.PolicySet {
		t.Errorf("the answer %+v is not its entry %s", d, d.Entry)
	}
	return e
}

// publications returns the index of every publication in the log of s,
// by digest.
func publications(t testing.TB, s *testServer) map[string][]uint64 {
	t.Helper()
	pubs := map[string][]uint64{}
	for i := range s.l.Size() {
		b, err := s.l.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == entry.KindPolicySet {
			pubs[e.PolicySet.String()] = append(pubs[e.PolicySet.String()], i)
		}
	}
	return pubs
}

// checkPublishedBefore checks the log of s: every ledger decision's set
// was published by an earlier entry, and its bundle is served.
func checkPublishedBefore(t testing.TB, s *testServer) {
	t.Helper()
	pubs := publications(t, s)
	for i := range s.l.Size() {
		b, _ := s.l.Entry(context.Background(), i)
		e, _ := entry.Parse(b)
		if e.Kind != entry.KindDecision {
			continue
		}
		at := pubs[e.PolicySet.String()]
		if len(at) == 0 || at[0] >= i {
			t.Fatalf("entry %d: decided with %s, published at %v: not before it", i, e.PolicySet, at)
		}
	}
	for digest := range pubs {
		status, b := apitest.GetBody(t, s.url+"/v1/policies/"+digest)
		if status != http.StatusOK || policy.DigestOfBundle(b).String() != digest {
			t.Errorf("GET /v1/policies/%s: %d, %d bytes hashing to %s", digest, status, len(b), policy.DigestOfBundle(b))
		}
	}
}

func policyServer(t testing.TB, dir string) *testServer {
	t.Helper()
	return startServerWith(t, func(c *config.Config) { c.CatalogDir, c.PolicyDir = apitest.CorpusDir, dir })
}

// Every call of the reference decision table, minimized by its
// declaration and decided over HTTP, answers the table's decision and
// determining ids (written by hand), recorded in a version 3 entry naming
// the reference set, which was published first (entry 0) and is served
// byte for byte; the export replays offline to the same decisions.
func TestDecideReferenceTable(t *testing.T) {
	s := policyServer(t, apitest.ReferencePolicies)
	want, err := policy.Load(apitest.ReferencePolicies, s.srv.cat.Declarations())
	if err != nil {
		t.Fatal(err)
	}
	digest := want.Digest().String()
	seen := map[string]bool{}
	counts := map[entry.Decision]int{}
	for _, c := range referencecalls.Table() {
		counts[c.Decision]++
		status, d, body := apitest.DecideOn(t, s.url, s.token, apitest.DecideBody(t, c))
		if status != http.StatusCreated {
			t.Fatalf("%s: %d %s", c.Name, status, body)
		}
		e := checkDecided(t, d)
		if d.Decision != c.Decision || !slices.Equal(d.Policies, c.Determining) {
			t.Errorf("%s: %s %v, want %s %v", c.Name, d.Decision, d.Policies, c.Decision, c.Determining)
		}
		if d.PolicySet != digest || e.Definition != s.srv.cat[c.Action].DefinitionDigest() || e.Mediator != "local" || e.Principal != c.Principal {
			t.Errorf("%s: policy set %s (want %s), definition %s, mediator %q", c.Name, d.PolicySet, digest, e.Definition, e.Mediator)
		}
		seen[c.Action] = true
	}
	if len(seen) != 5 {
		t.Errorf("the table decided %d actions, want the 5 reference actions", len(seen))
	}
	// The whole path's last step: the export, carrying the set, replays
	// offline to exactly these decisions.
	checkExportReplays(t, s, uint64(len(referencecalls.Table())), 1)
	if pubs := publications(t, s); !slices.Equal(pubs[digest], []uint64{0}) || len(pubs) != 1 {
		t.Errorf("publications %v, want %s at 0 only", pubs, digest)
	}
	checkPublishedBefore(t, s)
	status, b := apitest.GetBody(t, s.url+"/v1/policies/"+digest)
	if status != http.StatusOK || string(b) != string(want.Bundle()) {
		t.Errorf("GET /v1/policies/{digest}: %d, not the set's bundle", status)
	}
	var list struct {
		Current  string   `json:"current"`
		Archived []string `json:"archived"`
	}
	if status := apitest.GetJSON(t, s.url+"/v1/policies", &list); status != 200 || list.Current != digest || !slices.Equal(list.Archived, []string{digest}) {
		t.Errorf("GET /v1/policies: %d %+v", status, list)
	}
	_, metrics := apitest.GetBody(t, s.url+"/metrics")
	for _, line := range []string{
		fmt.Sprintf(`ledgerd_decisions_total{decision="allow"} %d`, counts[entry.Allow]),
		fmt.Sprintf(`ledgerd_decisions_total{decision="deny"} %d`, counts[entry.Deny]),
		fmt.Sprintf(`ledgerd_decisions_total{decision="needs_approval"} %d`, counts[entry.NeedsApproval]),
		`ledgerd_policy_set_info{policy_set="` + digest + `"} 1`,
	} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
}

// A decide request is refused, with a typed error and nothing recorded,
// when it names a decision or policies, has an unknown member, names an
// undeclared action, or reaches a ledger without policies.
func TestDecideRefusals(t *testing.T) {
	s := policyServer(t, apitest.ReferencePolicies)
	body := apitest.Payment(t)
	var req struct {
		TiersDigest string `json:"tiers_digest"`
	}
	json.Unmarshal([]byte(body), &req)
	tiers := req.TiersDigest
	size := s.l.Size()
	for _, c := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"decision", strings.Replace(body, `{`, `{"decision":"allow",`, 1), 400, "invalid_request", `member "decision" is refused`},
		{"policies", strings.Replace(body, `{`, `{"policies":["payments.allow-known-payee"],`, 1), 400, "invalid_request", `member "policies" is refused`},
		{"unknown member", strings.Replace(body, `{`, `{"verdict_SECRET":"allow",`, 1), 400, "invalid_request", "unknown member at index 0"},
		{"unknown action", strings.Replace(body, `"make_payment"`, `"pay_everyone"`, 1), 422, "unknown_action", "not in the server's catalog"},
		{"payload field", strings.Replace(body, `"attributes":{`, `"attributes":{"memo":"SECRET",`, 1), 422, "attributes_not_declared", "payload field"},
		{"tiers", strings.Replace(body, tiers, "sha256:"+strings.Repeat("0", 64), 1), 422, "tiers_mismatch", "tiers_digest"},
	} {
		status, _, answer := apitest.DecideOn(t, s.url, s.token, c.body)
		var e struct{ Error apiError }
		json.Unmarshal([]byte(answer), &e)
		if status != c.status || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) || strings.Contains(answer, "SECRET") {
			t.Errorf("%s: %d %s, want %d %s saying %q", c.name, status, answer, c.status, c.code, c.says)
		}
	}
	if s.l.Size() != size {
		t.Errorf("refusals appended %d entries", s.l.Size()-size)
	}
	plain := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	status, _, answer := apitest.DecideOn(t, plain.url, plain.token, body)
	if status != http.StatusNotFound || !strings.Contains(answer, `"no_policies"`) {
		t.Errorf("without policies: %d %s, want 404 no_policies", status, answer)
	}
	if status, _, answer := apitest.DecideOn(t, s.url, "not-a-token", body); status != http.StatusUnauthorized {
		t.Errorf("unknown token: %d %s", status, answer)
	}
}

// A retry with the same Idempotency-Key after a reload that changes the
// decision answers the first decision, from the stored entry, with the
// first set's digest; a new key gets the new set's decision.
func TestDecideIdempotentAcrossReload(t *testing.T) {
	dir := apitest.CopyPolicies(t)
	s := policyServer(t, dir)
	body := apitest.Payment(t)
	status, first, answer := apitest.DecideOn(t, s.url, s.token, body, "Idempotency-Key", "pay-1")
	if status != http.StatusCreated || first.Decision != entry.Allow {
		t.Fatalf("first: %d %s", status, answer)
	}
	f, _ := os.OpenFile(filepath.Join(dir, "payments.cedar"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(apitest.DenyAllPayments)
	f.Close()
	if err := s.srv.pol.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, again, answer := apitest.DecideOn(t, s.url, s.token, body, "Idempotency-Key", "pay-1")
	if status != http.StatusOK || again.Decision != entry.Allow || again.PolicySet != first.PolicySet ||
		again.Index != first.Index || !slices.Equal(again.Policies, first.Policies) {
		t.Errorf("retry: %d %s, want 200 with the first answer %+v", status, answer, first)
	}
	checkDecided(t, again)
	status, fresh, answer := apitest.DecideOn(t, s.url, s.token, body, "Idempotency-Key", "pay-2")
	if status != http.StatusCreated || fresh.Decision != entry.Deny || fresh.PolicySet == first.PolicySet ||
		!slices.Contains(fresh.Policies, "payments.freeze") {
		t.Errorf("new key: %d %s, want deny by payments.freeze under the new set", status, answer)
	}
	checkPublishedBefore(t, s)
	checkExportReplays(t, s, 2, 2)
}

// checkExportReplays exports the whole log of s and replays its ledger
// decisions offline (verify.VerifyDecisions) from the export alone,
// which must carry the bundles of both sets.
func checkExportReplays(t *testing.T, s *testServer, decisions, publications uint64) {
	t.Helper()
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, export := apitest.GetBody(t, fmt.Sprintf("%s/v1/export?start=0&end=%d", s.url, s.l.Size()))
	if status != http.StatusOK {
		t.Fatalf("export: %d %s", status, export)
	}
	key, err := verify.ParseKey(s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	report, err := verify.VerifyDecisions(bytes.NewReader(export), key, verify.DecisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || report.Decisions != decisions || report.Publications != publications {
		t.Errorf("replay of the export: %+v, want %d decisions and %d publications, all agreeing", report, decisions, publications)
	}
}

// A valid reload is archived and published before it decides; an
// invalid one is refused with file:line:col in the log, counted, and the
// set in force goes on deciding.
func TestPolicyReload(t *testing.T) {
	logs := &apitest.LockedBuffer{}
	testLogs = logs
	defer func() { testLogs = nil }()
	dir := apitest.CopyPolicies(t)
	s := policyServer(t, dir)
	body := apitest.Payment(t)
	_, before, _ := apitest.DecideOn(t, s.url, s.token, body)

	os.WriteFile(filepath.Join(dir, "freeze.cedar"), []byte(apitest.DenyAllPayments), 0o600)
	if err := s.srv.pol.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, after, _ := apitest.DecideOn(t, s.url, s.token, body)
	if before.PolicySet == after.PolicySet || after.Decision != entry.Deny {
		t.Fatalf("after the reload: %+v", after)
	}
	pubs := publications(t, s)
	if at := pubs[after.PolicySet]; len(at) != 1 || at[0] <= before.Index || at[0] >= after.Index {
		t.Errorf("the new set is published at %v, want between entries %d and %d", at, before.Index, after.Index)
	}
	checkPublishedBefore(t, s)

	// An invalid set: a syntax error at line 3, column 1.
	os.WriteFile(filepath.Join(dir, "broken.cedar"), []byte("// broken\n\npermit (principal, action, resource) when {\n"), 0o600)
	size := s.l.Size()
	err := s.srv.pol.Reload(context.Background())
	var le *policy.LoadError
	if !errors.As(err, &le) || le.File != "broken.cedar" || le.Line == 0 {
		t.Fatalf("invalid reload: %v, want a LoadError at broken.cedar:line:col", err)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("broken.cedar:%d:%d", le.Line, le.Column)) || !strings.Contains(logs.String(), "policy reload refused") {
		t.Errorf("the log does not name broken.cedar:%d:%d:\n%s", le.Line, le.Column, logs.String())
	}
	if s.l.Size() != size {
		t.Errorf("a refused reload appended %d entries", s.l.Size()-size)
	}
	if _, still, _ := apitest.DecideOn(t, s.url, s.token, body); still.PolicySet != after.PolicySet || still.Decision != entry.Deny {
		t.Errorf("after a refused reload: %+v, want the set in force, %s", still, after.PolicySet)
	}
	_, metrics := apitest.GetBody(t, s.url+"/metrics")
	for _, line := range []string{`ledgerd_policy_reloads_total{result="ok"} 1`, `ledgerd_policy_reloads_total{result="failed"} 1`,
		`ledgerd_policy_set_info{policy_set="` + after.PolicySet + `"} 1`} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	var list struct{ Archived []string }
	apitest.GetJSON(t, s.url+"/v1/policies", &list)
	if !slices.Contains(list.Archived, before.PolicySet) || !slices.Contains(list.Archived, after.PolicySet) || len(list.Archived) != 2 {
		t.Errorf("archived %v, want both sets", list.Archived)
	}
}

// GET /v1/policies/{digest} refuses a malformed digest and answers 404
// for one never published.
func TestPolicyBundleRefusals(t *testing.T) {
	s := policyServer(t, apitest.ReferencePolicies)
	for path, want := range map[string]int{
		"/v1/policies/sha256:" + strings.Repeat("0", 64): 404,
		"/v1/policies/sha256:" + strings.Repeat("A", 64): 400,
		"/v1/policies/" + strings.Repeat("0", 64):        400,
		"/v1/policies/sha256:00":                         400,
	} {
		if status, b := apitest.GetBody(t, s.url+path); status != want {
			t.Errorf("%s: %d %s, want %d", path, status, b, want)
		}
	}
}

// A policy set of over 1 MiB (some 6,000 policies in two files) loads,
// is archived, published and served byte for byte.
func TestLargePolicySet(t *testing.T) {
	dir := apitest.CopyPolicies(t)
	for f := range 2 {
		var b strings.Builder
		for i := 0; b.Len() < 600<<10; i++ {
			fmt.Fprintf(&b, "@id(\"bulk.f%d-%05d\")\nforbid (principal, action == Action::\"make_payment\", resource)\nwhen { context.amount_minor == %d && context.currency == \"XBT\" };\n\n", f, i, 1_000_000+i)
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("bulk%d.cedar", f)), []byte(b.String()), 0o600)
	}
	s := policyServer(t, dir)
	set := s.srv.pol.Current()
	if n := len(set.Bundle()); n < 1<<20 {
		t.Fatalf("the set's bundle is %d bytes, want over 1 MiB", n)
	}
	status, d, answer := apitest.DecideOn(t, s.url, s.token, apitest.Payment(t))
	if status != http.StatusCreated || d.Decision != entry.Allow || d.PolicySet != set.Digest().String() {
		t.Fatalf("decide: %d %s", status, answer)
	}
	status, b := apitest.GetBody(t, s.url+"/v1/policies/"+d.PolicySet)
	if status != 200 || string(b) != string(set.Bundle()) {
		t.Errorf("GET the large set: %d, %d bytes", status, len(b))
	}
	files, err := policy.ParseBundle(b)
	if err != nil || len(files) != 7 {
		t.Errorf("ParseBundle: %d files, %v", len(files), err)
	}
	checkPublishedBefore(t, s)
}

// The archive's files are owner-only, and a start with the set the
// archive records as published, whose publication entry is there,
// publishes nothing; one whose record is in doubt publishes again.
func TestPolicyArchiveRestart(t *testing.T) {
	dir := apitest.CopyPolicies(t)
	s := policyServer(t, dir)
	set := s.srv.pol.Current()
	archive := filepath.Join(s.cfg.StoreDir, policies.DirName)
	for _, name := range []string{"", policies.BundleFileName(set.Digest()), policies.PublishedName} {
		st, err := os.Stat(filepath.Join(archive, name))
		if err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v", filepath.Join(archive, name), err, st.Mode())
		}
	}
	p := policies.New(s.cfg.PolicyDir, s.cfg.StoreDir, s.srv.cat, s.l, s.srv.log, metrics.New())
	size := s.l.Size()
	if err := p.Start(context.Background(), set); err != nil || s.l.Size() != size {
		t.Errorf("a start with the published set: %v, %d new entries, want none", err, s.l.Size()-size)
	}
	// In doubt: the record names an index whose entry is not the publication.
	apitest.DecideOn(t, s.url, s.token, apitest.Payment(t))
	os.WriteFile(filepath.Join(archive, policies.PublishedName), []byte(fmt.Sprintf(`{"policy_set":%q,"index":%d}`, set.Digest(), s.l.Size()-1)), 0o600)
	size = s.l.Size()
	if err := p.Start(context.Background(), set); err != nil || s.l.Size() != size+1 {
		t.Errorf("a start in doubt: %v, %d new entries, want 1", err, s.l.Size()-size)
	}
	// A pending record (a crash during a publication): publish again.
	os.WriteFile(filepath.Join(archive, policies.PublishedName), []byte(fmt.Sprintf(`{"policy_set":%q}`, set.Digest())), 0o600)
	if err := p.Start(context.Background(), set); err != nil || s.l.Size() != size+2 {
		t.Errorf("a start after a pending publication: %v, %d new entries, want 2", err, s.l.Size()-size)
	}
	// A damaged archived bundle is written again.
	os.WriteFile(filepath.Join(archive, policies.BundleFileName(set.Digest())), []byte("damaged"), 0o600)
	if status, _ := apitest.GetBody(t, s.url+"/v1/policies/"+set.Digest().String()); status != 500 {
		t.Errorf("a damaged bundle served: %d, want 500", status)
	}
	if err := p.Start(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	checkPublishedBefore(t, s)
}

// Reloads while 8 clients decide and append (in process, for -race):
// no request fails, and every decision's set was published before it.
func TestReloadUnderLoad(t *testing.T) {
	dir := apitest.CopyPolicies(t)
	s := policyServer(t, dir)
	mail := apitest.DecideBody(t, referencecalls.Table()[10])
	appendMail := strings.Replace(mail, "{", `{"decision":"allow","policies":["mediator.own"],`, 1)
	quit := make(chan struct{})
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for ; ; n++ {
				select {
				case <-quit:
					if n == 0 {
						errs <- "no request"
					}
					return
				default:
				}
				var status int
				var answer string
				if g%2 == 0 {
					status, _, answer = apitest.DecideOn(t, s.url, s.token, mail)
				} else {
					resp, b := s.post(t, s.token, appendMail)
					status, answer = resp.StatusCode, string(b)
				}
				if status != http.StatusCreated {
					errs <- fmt.Sprintf("%d %s", status, answer)
					return
				}
			}
		})
	}
	for i := range 6 {
		if i%2 == 0 {
			os.WriteFile(filepath.Join(dir, "freeze.cedar"), []byte(apitest.DenyAllPayments), 0o600)
		} else {
			os.Remove(filepath.Join(dir, "freeze.cedar"))
		}
		if err := s.srv.pol.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(quit)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a request during reloads: %s", e)
	}
	if pubs := publications(t, s); len(pubs) != 2 {
		t.Errorf("publications of %d sets, want 2", len(pubs))
	}
	checkPublishedBefore(t, s)
}
