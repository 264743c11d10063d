package project

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// leaks reports whether out holds any 4-character substring of secret:
// the part of a raw value a projection exists to remove.
func leaks(out, secret string) bool {
	for i := 0; i+4 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+4]) {
			return true
		}
	}
	return false
}

func serialize(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRecipientDomain(t *testing.T) {
	for _, c := range []struct{ in, want, secret string }{
		{"alice.smith@example.com", `"example.com"`, "alice.smith"},
		{"Bob.Jones+billing@Mail.Example.ORG", `"mail.example.org"`, "Bob.Jones+billing"},
	} {
		got, err := RecipientDomain(c.in)
		out := serialize(t, got)
		if err != nil || out != c.want || leaks(out, c.secret) {
			t.Errorf("%q: %s, %v", c.in, out, err)
		}
	}
	for _, in := range []any{nil, 42, "", "no-at-sign.example.com", "@example.com", "a@b@example.com",
		"someone@localhost", "someone@exa_mple.com", "someone@exämple.com", "someone@-x.example.com", "someone@example..com"} {
		got, err := RecipientDomain(in)
		var pe *Error
		if !errors.As(err, &pe) || got != "" {
			t.Errorf("%v: %q, %v; want a refusal", in, got, err)
		}
		if s, ok := in.(string); ok && len(s) >= 4 && strings.Contains(err.Error(), s) {
			t.Errorf("error repeats the input: %v", err)
		}
	}
}

func TestPayeeKnown(t *testing.T) {
	list := map[string]bool{"Café Exemple SARL": true}
	if !PayeeKnown("Café Exemple SARL", list) {
		t.Error("listed payee not known")
	}
	for _, c := range []struct {
		v    any
		list map[string]bool
	}{{"Other Ltd", list}, {"Café Exemple SARL", nil}, {nil, list}, {1, list}} {
		if PayeeKnown(c.v, c.list) {
			t.Errorf("%v with %v: known", c.v, c.list)
		}
	}
}

func TestEndpointHost(t *testing.T) {
	got, err := EndpointHost("https://user:pw-secret@API.Example.org:8443/v1/invoices/INV-4711?token=abcdef#frag")
	out := serialize(t, got)
	if err != nil || out != `"api.example.org"` {
		t.Fatalf("%s, %v", out, err)
	}
	for _, secret := range []string{"pw-secret", "INV-4711", "token=abcdef", "8443"} {
		if leaks(out, secret) {
			t.Errorf("output leaks %q", secret)
		}
	}
	for _, in := range []any{nil, "ftp://example.com/x", "example.com/x", "https://", "http://localhost/x", "mailto:a@example.com", "https://exa mple.com/"} {
		if _, err := EndpointHost(in); err == nil {
			t.Errorf("%v accepted", in)
		}
	}
}

func TestRouteShape(t *testing.T) {
	templates := []string{"/v1/invoices/{id}", "/v1/invoices/{id}/lines/{line}", "/v1/health"}
	for _, c := range []struct{ in, want, secret string }{
		{"https://api.example.org/v1/invoices/INV-2026-1142?expand=all", "/v1/invoices/{id}", "INV-2026-1142"},
		{"https://api.example.org/v1/invoices/INV-9/lines/77?x=1", "/v1/invoices/{id}/lines/{line}", "INV-9"},
		{"https://api.example.org/v1/health", "/v1/health", ""},
		// Unmatched paths give a fixed value, never a cleaned copy.
		{"https://api.example.org/v1/patients/4711-secret", Unmatched, "patients/4711-secret"},
		{"https://api.example.org/v1/invoices/", Unmatched, ""},
		{"https://api.example.org/v1/invoices/INV-1/extra", Unmatched, "INV-1/extra"},
	} {
		got, err := RouteShape(c.in, templates)
		out := serialize(t, got)
		if err != nil || got != c.want || c.secret != "" && leaks(out, c.secret) {
			t.Errorf("%q: %s, %v; want %q", c.in, out, err, c.want)
		}
	}
	if got, _ := RouteShape("https://api.example.org/v1/invoices/1", nil); got != Unmatched {
		t.Errorf("no templates: %q", got)
	}
	if _, err := RouteShape("/v1/invoices/1", templates); err == nil {
		t.Error("a relative URL accepted")
	}
}

// The first-cut path projection the design's paper reports returned the
// identifier it was meant to remove; this one drops the final segment
// whatever it is, checked on the serialized output.
func TestResourceDir(t *testing.T) {
	for _, c := range []struct{ in, want, secret string }{
		{"/records/2026/11/patient-4711.json", `"/records/2026/11"`, "patient-4711.json"},
		{"records/2026/ssn-123-45-6789", `"/records/2026"`, "ssn-123-45-6789"},
		{"/secret-document-name", `"/"`, "secret-document-name"},
		{"/dir/sub/", "", ""},
	} {
		got, err := ResourceDir(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q accepted: %q", c.in, got)
			}
			continue
		}
		out := serialize(t, got)
		if err != nil || out != c.want || leaks(out, c.secret) {
			t.Errorf("%q: %s, %v", c.in, out, err)
		}
	}
	for _, in := range []any{nil, 7, "", "/a/../b", "/a/./b", "//a", `C:\dir\file`, "/a\x00b"} {
		if _, err := ResourceDir(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestByteSizeAndCount(t *testing.T) {
	if n, err := ByteSize("héllo"); err != nil || n != 6 {
		t.Errorf("ByteSize: %d, %v", n, err)
	}
	if _, err := ByteSize(12); err == nil {
		t.Error("ByteSize of a number accepted")
	}
	if n, err := Count([]any{"a", "b", "c"}); err != nil || n != 3 {
		t.Errorf("Count: %d, %v", n, err)
	}
	if n, err := Count(nil); err != nil || n != 0 {
		t.Errorf("Count(nil): %d, %v", n, err)
	}
	if _, err := Count("abc"); err == nil {
		t.Error("Count of a string accepted")
	}
}
