package entry

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// fields are the members of a signed version 1 entry, in canonical order;
// fieldsV2 those of version 2.
var (
	fields = []string{
		"action", "attributes", "decision", "index", "key_id", "mediator",
		"origin", "params_digest", "params_size", "policies", "prev",
		"principal", "sig", "tiers_digest", "time", "version",
	}
	fieldsV2 = []string{
		"action", "attributes", "decision", "definition_digest", "index", "key_id", "mediator",
		"origin", "params_digest", "params_size", "policies", "prev",
		"principal", "sig", "tiers_digest", "time", "version",
	}
	// fieldsV3Decision are the members of a version 3 ledger decision,
	// fieldsV3PolicySet those of a policy-set publication.
	fieldsV3Decision = []string{
		"action", "attributes", "decision", "definition_digest", "index", "key_id", "kind", "mediator",
		"origin", "params_digest", "params_size", "policies", "policy_errors", "policy_set", "prev",
		"principal", "sig", "tiers_digest", "time", "version",
	}
	fieldsV3PolicySet = []string{
		"index", "key_id", "kind", "origin", "policy_set", "prev", "sig", "time", "version",
	}
)

// Parse decodes a signed entry strictly. It refuses input that is not the
// canonical JSON of a valid entry: non-canonical bytes (whitespace, member
// order, escapes, number spelling), unknown or missing members, wrong
// types, values outside their rules, and anything that would not re-encode
// to exactly the same bytes. It does not check the signature (Verify does).
func Parse(b []byte) (*Entry, error) {
	// The message is shorter than the entry (it has no "sig" member)
	// apart from its separator.
	e, _, err := ParseMessage(b, make([]byte, 0, len(b)+len(SignedDomainSeparator)))
	return e, err
}

// ParseMessage is Parse, and also appends to buf the entry's signed
// message (as AppendSignedMessage does), which a verifier needs next: it
// comes at no cost from the check that the entry re-encodes to b. It
// returns buf unchanged with an error.
func ParseMessage(b, buf []byte) (*Entry, []byte, error) {
	if e, m := parseFast(b, buf); e != nil {
		return e, m, nil
	}
	e, err := parseStrict(b)
	if err != nil {
		return nil, buf, err
	}
	m, err := e.AppendSignedMessage(buf)
	if err != nil { // unreachable: parseStrict has encoded e already
		return nil, buf, err
	}
	return e, m, nil
}

// parseStrict is Parse's reference decoding: every check is made on its
// own, with the JSON parsers of package commit and encoding/json, and
// each refusal names what failed. parseFast accepts a subset of what it
// accepts, with the same result, and Parse asks parseStrict about the
// rest, so that errors stay those of parseStrict.
func parseStrict(b []byte) (*Entry, error) {
	if len(b) > MaxEntryBytes {
		return nil, fieldError("", "longer than %d bytes", MaxEntryBytes)
	}
	canonical, err := commit.Canonicalize(b)
	if err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return nil, fieldError("", "outside the strict JSON domain: %s at %q", de.Kind, de.Pointer)
		}
		return nil, fieldError("", "%v", err)
	}
	if !bytes.Equal(canonical, b) {
		return nil, ErrNotCanonical
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, fieldError("", "not a JSON object")
	}
	d := decoder{members: members}
	want := fields
	var kind Kind
	switch v := d.uint("version"); {
	case d.err != nil:
		return nil, d.err
	case v == Version2:
		want = fieldsV2
	case v == Version3 || v == Version4:
		if _, ok := members["kind"]; !ok {
			return nil, fieldError("kind", "missing")
		}
		switch kind = Kind(d.string("kind")); {
		case v == Version3 && kind == KindDecision:
			want = fieldsV3Decision
		case v == Version3 && kind == KindPolicySet:
			want = fieldsV3PolicySet
		case v == Version4 && kind.isVersion4():
			_, op := members["operation_id"]
			want = fieldsV4(kind, op && kind == KindOutcome)
		default:
			d.fail("kind", "not a kind of version %d", v)
		}
		if d.err != nil {
			return nil, d.err
		}
	case v == Version5:
		if _, ok := members["kind"]; !ok {
			return nil, fieldError("kind", "missing")
		}
		if kind = Kind(d.string("kind")); kind != KindOutcome {
			d.fail("kind", "not a kind of version %d", v)
		}
		if d.err != nil {
			return nil, d.err
		}
		_, op := members["operation_id"]
		want = fieldsV5(op)
	case v != Version1:
		return nil, fieldError("version", "unsupported version %d (this reader knows 1 to %d)", v, Version5)
	}
	// In sorted order, so that the member named is the same every time.
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains(want, name) {
			return nil, fieldError(name, "unknown member")
		}
	}
	for _, name := range want {
		if _, ok := members[name]; !ok {
			return nil, fieldError(name, "missing")
		}
	}
	e := &Entry{
		Kind:      kind,
		Index:     d.uint("index"),
		KeyID:     d.string("key_id"),
		Origin:    d.string("origin"),
		Prev:      d.digest("prev"),
		Time:      d.time("time"),
		Signature: d.signature("sig"),
	}
	if kind.isVersion4() {
		d.decodeV4(e)
		switch {
		case kind == KindOutcome && slices.Contains(want, "decision"):
			// Version 5: no approval.
			e.DecisionIndex = d.uint("decision")
		case kind == KindOutcome && d.err == nil && e.ApprovalID == (commit.Digest{}):
			// A version 4 outcome names its approval (without one it
			// would encode as version 5).
			d.fail("approval", "all zeros")
		}
	} else if kind != "" {
		if e.PolicySet = d.digest("policy_set"); d.err == nil && e.PolicySet == (commit.Digest{}) {
			d.fail("policy_set", "all zeros: a version 3 entry names a policy set")
		}
	}
	if kind != KindPolicySet && !kind.isVersion4() {
		e.Action = d.string("action")
		e.Decision = Decision(d.string("decision"))
		e.Mediator = d.string("mediator")
		e.Principal = d.string("principal")
		e.Policies = d.strings("policies")
		e.Tiers = d.digest("tiers_digest")
		if kind == KindDecision {
			e.PolicyErrors = d.strings("policy_errors")
		}
		if _, ok := members["definition_digest"]; ok {
			if e.Definition = d.digest("definition_digest"); d.err == nil && e.Definition == (commit.Digest{}) {
				d.fail("definition_digest", "all zeros: a version 2 or 3 entry names a definition")
			}
		}
		e.Params.Digest, e.Params.Hiding = d.paramsDigest("params_digest")
		e.Params.Size = int(d.uint("params_size"))
		if raw := members["attributes"]; len(raw) > 0 && raw[0] == '{' {
			e.Attributes = bytes.Clone(raw)
		} else if d.err == nil {
			d.err = fieldError("attributes", "not an object")
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	again, err := e.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		// Unreachable if the checks above are complete; kept so that no
		// bytes are ever accepted that do not re-encode identically.
		return nil, ErrNotCanonical
	}
	return e, nil
}

// decoder reads typed members, keeping the first error.
type decoder struct {
	members map[string]json.RawMessage
	err     error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fieldError(field, format, args...)
	}
}

func (d *decoder) string(field string) string {
	raw := d.members[field]
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		d.fail(field, "not a string")
	}
	return s
}

func (d *decoder) uint(field string) uint64 {
	v, err := strconv.ParseUint(string(d.members[field]), 10, 64)
	if err != nil || v > commit.MaxSafeInteger {
		d.fail(field, "not an integer in 0..2^53-1")
	}
	return v
}

func (d *decoder) strings(field string) []string {
	raw := d.members[field]
	var ss []string
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &ss) != nil {
		d.fail(field, "not an array of strings")
	}
	if ss == nil {
		ss = []string{}
	}
	return ss
}

func (d *decoder) digest(field string) commit.Digest {
	s := d.string(field)
	if d.err != nil {
		return commit.Digest{}
	}
	v, err := commit.ParseDigest(s)
	if err != nil {
		d.fail(field, "not a digest (sha256:<64 lower-case hex digits>)")
	}
	return v
}

// paramsDigest reads a parameter digest of either commitment version
// (docs/commitment.md §6).
func (d *decoder) paramsDigest(field string) (commit.Digest, bool) {
	s := d.string(field)
	if d.err != nil {
		return commit.Digest{}, false
	}
	v, hiding, err := commit.ParseParamsDigest(s)
	if err != nil {
		d.fail(field, "not a parameter digest (sha256:<64 lower-case hex digits>, or v2:sha256:<64 lower-case hex digits>)")
	}
	return v, hiding
}

func (d *decoder) time(field string) time.Time {
	s := d.string(field)
	if d.err != nil {
		return time.Time{}
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		d.fail(field, "not a UTC time written as %s", TimeLayout)
	}
	return t
}

func (d *decoder) signature(field string) []byte {
	s := d.string(field)
	if d.err != nil {
		return nil
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(sig) != 64 {
		d.fail(field, "not a base64 Ed25519 signature")
	}
	return sig
}
