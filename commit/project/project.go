// Package project holds the projections of field-tier minimization: the
// functions that turn a raw `derived` parameter value into the attribute a
// mediator's policy may see ("the recipient is at example.com", not the
// address).
//
// Every projection fails closed. Input that is absent, of the wrong type
// or malformed gives a typed *Error (or, for predicates, the denying value
// false), never the raw value and never a cleaned copy of it: an error
// message names the projection and the rule, not the input. A projection's
// output contains nothing of the raw value but what it is defined to keep
// (a domain, a host, a directory), and the tests check that on the
// serialized output.
//
// Raw values are Go values as encoding/json decodes them with UseNumber:
// string, json.Number, bool, nil, []any, map[string]any.
package project

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Unmatched is route_shape's value for a path that matches no declared
// route template. It is fixed, so it says nothing about the path.
const Unmatched = "unmatched"

// Error says why a projection refused its input. It never holds the input.
type Error struct {
	Projection string
	Problem    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("projection %s: %s", e.Projection, e.Problem)
}

func refuse(projection, problem string) error {
	return &Error{Projection: projection, Problem: problem}
}

// RecipientDomain maps an email address to its domain in lower-case ASCII:
// "Alice@Example.COM" gives "example.com". It refuses anything that is not
// one local part, one "@" and a domain of LDH labels.
func RecipientDomain(v any) (string, error) {
	const name = "recipient_domain"
	s, ok := v.(string)
	if !ok {
		return "", refuse(name, "not a string")
	}
	local, domain, found := strings.Cut(s, "@")
	if !found || local == "" || strings.Contains(domain, "@") {
		return "", refuse(name, "not an email address")
	}
	domain = strings.ToLower(domain)
	if !validHostname(domain) {
		return "", refuse(name, "the domain is not ASCII letters, digits and hyphens in dot-separated labels")
	}
	return domain, nil
}

// validHostname accepts dot-separated labels of ASCII letters, digits and
// inner hyphens, each 1 to 63 characters, at most 253 in all, with at
// least two labels.
func validHostname(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// PayeeKnown says whether a payee is on an allowlist. Anything but a
// string found on the list, including a missing list, gives false.
func PayeeKnown(v any, allowlist map[string]bool) bool {
	s, ok := v.(string)
	return ok && allowlist != nil && allowlist[s]
}

// EndpointHost maps an http or https URL to its host name in lower-case
// ASCII, without port, user information, path, query or fragment.
func EndpointHost(v any) (string, error) {
	const name = "endpoint_host"
	u, err := parseURL(v, name)
	if err != nil {
		return "", err
	}
	host := strings.ToLower(u.Hostname())
	if !validHostname(host) {
		return "", refuse(name, "the host is not a DNS name of ASCII labels")
	}
	return host, nil
}

func parseURL(v any, name string) (*url.URL, error) {
	s, ok := v.(string)
	if !ok {
		return nil, refuse(name, "not a string")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, refuse(name, "not an absolute http or https URL")
	}
	return u, nil
}

// RouteShape matches a URL's path against the route templates declared
// for the action and returns the first template that matches, such as
// "/v1/invoices/{id}"; a path that matches none gives Unmatched. A
// template's segments are literals, which must be equal, or {name}, which
// matches any one non-empty segment. The query and fragment play no part.
func RouteShape(v any, templates []string) (string, error) {
	const name = "route_shape"
	u, err := parseURL(v, name)
	if err != nil {
		return "", err
	}
	path := u.EscapedPath()
	for _, tmpl := range templates {
		if matchRoute(tmpl, path) {
			return tmpl, nil
		}
	}
	return Unmatched, nil
}

func matchRoute(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		t, p := ts[i], ps[i]
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if p == "" {
				return false
			}
			continue
		}
		if t != p {
			return false
		}
	}
	return true
}

// ResourceDir maps a slash-separated resource path to its directory: the
// final segment is dropped entirely, whatever it holds, so
// "/records/2026/11/patient-4711.json" gives "/records/2026/11". A path
// with no directory ("name" or "/name") gives "/". Dot segments and empty
// segments are refused, not cleaned.
func ResourceDir(v any) (string, error) {
	const name = "resource_dir"
	s, ok := v.(string)
	if !ok {
		return "", refuse(name, "not a string")
	}
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, "\\\x00") {
		return "", refuse(name, "not a slash-separated path")
	}
	segments := strings.Split(strings.TrimPrefix(s, "/"), "/")
	for _, seg := range segments {
		if seg == "" || seg == "." || seg == ".." {
			return "", refuse(name, "the path has an empty or dot segment")
		}
	}
	return "/" + strings.Join(segments[:len(segments)-1], "/"), nil
}

// ByteSize gives the size in bytes of a string (its UTF-8 encoding).
func ByteSize(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, refuse("byte_size", "not a string")
	}
	return int64(len(s)), nil
}

// Count gives the number of elements of an array (nil, an absent array,
// counts 0).
func Count(v any) (int64, error) {
	switch a := v.(type) {
	case nil:
		return 0, nil
	case []any:
		return int64(len(a)), nil
	}
	return 0, refuse("count", "not an array")
}
