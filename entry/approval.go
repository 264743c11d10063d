package entry

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// Version 4 records the approval lifecycle (docs/approvals.md): the
// ledger's approval settings, a person's verdict on a needs_approval
// decision, the consumption of an approval by the mediator about to act,
// and the outcome of that act. The request itself is the needs_approval
// decision entry (any version); its entry hash is the approval's id.
const (
	Version4                = 4
	SignedDomainSeparatorV4 = "ledger/v4/entry\n"
)

// The version 4 kinds.
const (
	// KindApprovalConfig publishes the approval deadlines in force from
	// this entry on: PendingTTL and ExecutionTTL.
	KindApprovalConfig Kind = "approval_config"
	// KindApproval is a person's verdict (Approver, Verdict) on the
	// approval ApprovalID opened by the request at index Request, having
	// been shown the preview whose digest is PreviewDigest.
	KindApproval Kind = "approval"
	// KindConsumption spends the approval ApprovalID (opened at index
	// Request): Mediator is about to perform Action for Principal with
	// the parameters committed to by Params, all equal to the request's.
	KindConsumption Kind = "consumption"
	// KindOutcome is what Mediator reports of the act the consumption at
	// index Consumption permitted: Result, and the downstream system's
	// OperationID if any.
	KindOutcome Kind = "outcome"
)

// Verdict is a person's answer to an approval request.
type Verdict string

const (
	Approve Verdict = "approve"
	Reject  Verdict = "deny"
)

// Result is the effect a mediator reports for a consumed approval.
type Result string

const (
	Succeeded Result = "succeeded"
	Failed    Result = "failed"
	Unknown   Result = "unknown"
)

// MaxTTL bounds the approval deadlines: a year.
const MaxTTL = 366 * 24 * time.Hour

// isVersion4 reports whether k is one of the version 4 kinds.
func (k Kind) isVersion4() bool {
	return k == KindApprovalConfig || k == KindApproval || k == KindConsumption || k == KindOutcome
}

// v4Members lists, per version 4 kind, its members besides the common
// ones (index, key_id, kind, origin, prev, sig, time, version); outcome's
// operation_id is optional.
var v4Members = map[Kind][]string{
	KindApprovalConfig: {"execution_ttl_ms", "pending_ttl_ms"},
	KindApproval:       {"approval", "approver", "preview_digest", "request", "verdict"},
	KindConsumption:    {"action", "approval", "mediator", "params_digest", "params_size", "principal", "request"},
	KindOutcome:        {"approval", "consumption", "mediator", "operation_id", "result"},
}

// fieldsV4 returns the members of a version 4 entry of kind k, in
// canonical order, given whether it has an operation_id.
func fieldsV4(k Kind, operationID bool) []string {
	f := []string{"index", "key_id", "kind", "origin", "prev", "sig", "time", "version"}
	for _, m := range v4Members[k] {
		if m == "operation_id" && !operationID {
			continue
		}
		f = append(f, m)
	}
	slices.Sort(f)
	return f
}

// checkV4 checks a version 4 entry: its kind's members valid, every
// other member zero.
func (e *Entry) checkV4() error {
	set := map[string]bool{
		"action": e.Action != "", "attributes": e.Attributes != nil, "decision": e.Decision != "",
		"definition_digest": e.Definition != (commit.Digest{}), "mediator": e.Mediator != "",
		"params_digest": e.Params != (commit.Commitment{}), "params_size": e.Params != (commit.Commitment{}),
		"policies": e.Policies != nil, "policy_errors": e.PolicyErrors != nil, "policy_set": e.PolicySet != (commit.Digest{}),
		"principal": e.Principal != "", "tiers_digest": e.Tiers != (commit.Digest{}),
		"approval": e.ApprovalID != (commit.Digest{}), "approver": e.Approver != "", "verdict": e.Verdict != "",
		"preview_digest": e.PreviewDigest != (commit.Digest{}), "request": e.Request != 0,
		"consumption": e.Consumption != 0, "result": e.Result != "", "operation_id": e.OperationID != "",
		"pending_ttl_ms": e.PendingTTL != 0, "execution_ttl_ms": e.ExecutionTTL != 0,
	}
	allowed := v4Members[e.Kind]
	for _, name := range slices.Sorted(mapKeys(set)) {
		if set[name] && !slices.Contains(allowed, name) {
			return fieldError(name, "not a member of an entry of kind %s", e.Kind)
		}
	}
	switch e.Kind {
	case KindApprovalConfig:
		for _, ttl := range []struct {
			name string
			d    time.Duration
		}{{"execution_ttl_ms", e.ExecutionTTL}, {"pending_ttl_ms", e.PendingTTL}} {
			if ttl.d <= 0 || ttl.d > MaxTTL || ttl.d%time.Millisecond != 0 {
				return fieldError(ttl.name, "not a whole number of milliseconds from 1 to %d", MaxTTL.Milliseconds())
			}
		}
		return nil
	case KindApproval:
		if e.Verdict != Approve && e.Verdict != Reject {
			return fieldError("verdict", "not approve or deny")
		}
		if e.PreviewDigest == (commit.Digest{}) {
			return fieldError("preview_digest", "all zeros")
		}
		if e.Approver == "" {
			return fieldError("approver", "empty")
		}
	case KindConsumption:
		if e.Params.Size < e.Params.MinSize() || e.Params.Size > commit.MaxSafeInteger {
			return fieldError("params_size", "not a canonical object size")
		}
	case KindOutcome:
		if e.Result != Succeeded && e.Result != Failed && e.Result != Unknown {
			return fieldError("result", "not succeeded, failed or unknown")
		}
		if e.Consumption >= e.Index {
			return fieldError("consumption", "not an earlier entry")
		}
	}
	if e.ApprovalID == (commit.Digest{}) {
		return fieldError("approval", "all zeros")
	}
	if e.Kind != KindOutcome && e.Request >= e.Index {
		return fieldError("request", "not an earlier entry")
	}
	return nil
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// appendMembers appends the canonical JSON of a version 4 or 5 entry:
// its members, names, written in canonical (byte) order.
func (e *Entry) appendMembers(b []byte, names []string, version int, withSignature bool) ([]byte, error) {
	var err error
	b = append(b, '{')
	for i, name := range names {
		if name == "sig" && !withSignature {
			continue
		}
		if i > 0 && b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		str := func(s string) {
			if err != nil {
				return
			}
			if s == "" {
				err = fieldError(name, "empty")
				return
			}
			if len(s) > MaxStringBytes {
				err = fieldError(name, "longer than %d bytes", MaxStringBytes)
				return
			}
			var de error
			if b, de = commit.AppendString(b, s); de != nil {
				var k *commit.DomainError
				errors.As(de, &k)
				err = fieldError(name, "%s", k.Kind)
				return
			}
			if r, at, found := refusedRune(s); found {
				err = &FieldError{Field: name, Err: ErrIdentifierChar,
					Problem: fmt.Sprintf("%U at byte %d: identifiers hold no control or format characters", r, at)}
			}
		}
		digest := func(d commit.Digest) {
			b = append(b, '"')
			b, _ = d.AppendText(b)
			b = append(b, '"')
		}
		switch name {
		case "action":
			str(e.Action)
		case "approval":
			digest(e.ApprovalID)
		case "approver":
			str(e.Approver)
		case "consumption":
			b = strconv.AppendUint(b, e.Consumption, 10)
		case "decision":
			b = strconv.AppendUint(b, e.DecisionIndex, 10)
		case "execution_ttl_ms":
			b = strconv.AppendInt(b, e.ExecutionTTL.Milliseconds(), 10)
		case "index":
			b = strconv.AppendUint(b, e.Index, 10)
		case "key_id":
			str(e.KeyID)
		case "kind":
			str(string(e.Kind))
		case "mediator":
			str(e.Mediator)
		case "operation_id":
			str(e.OperationID)
		case "origin":
			str(e.Origin)
		case "params_digest":
			b = append(b, '"')
			b = e.Params.AppendDigestText(b)
			b = append(b, '"')
		case "params_size":
			b = strconv.AppendInt(b, int64(e.Params.Size), 10)
		case "pending_ttl_ms":
			b = strconv.AppendInt(b, e.PendingTTL.Milliseconds(), 10)
		case "prev":
			digest(e.Prev)
		case "preview_digest":
			digest(e.PreviewDigest)
		case "principal":
			str(e.Principal)
		case "request":
			b = strconv.AppendUint(b, e.Request, 10)
		case "result":
			str(string(e.Result))
		case "sig":
			if len(e.Signature) != 64 {
				return nil, fieldError("sig", "not a 64-byte Ed25519 signature")
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, e.Signature)
			b = append(b, '"')
		case "time":
			b = append(b, '"')
			b = e.Time.UTC().AppendFormat(b, TimeLayout)
			b = append(b, '"')
		case "verdict":
			str(string(e.Verdict))
		case "version":
			b = strconv.AppendInt(b, int64(version), 10)
		}
	}
	b = append(b, '}')
	if err != nil {
		return nil, err
	}
	return b, nil
}

// decodeV4 reads the members of a version 4 entry of kind k into e.
func (d *decoder) decodeV4(e *Entry) {
	has := func(name string) bool { _, ok := d.members[name]; return ok }
	if has("approval") {
		e.ApprovalID = d.digest("approval")
	}
	if has("approver") {
		e.Approver = d.string("approver")
	}
	if has("verdict") {
		e.Verdict = Verdict(d.string("verdict"))
	}
	if has("preview_digest") {
		e.PreviewDigest = d.digest("preview_digest")
	}
	if has("request") {
		e.Request = d.uint("request")
	}
	if has("consumption") {
		e.Consumption = d.uint("consumption")
	}
	if has("result") {
		e.Result = Result(d.string("result"))
	}
	if has("operation_id") {
		e.OperationID = d.string("operation_id")
	}
	if has("action") {
		e.Action = d.string("action")
	}
	if has("mediator") {
		e.Mediator = d.string("mediator")
	}
	if has("principal") {
		e.Principal = d.string("principal")
	}
	if has("params_digest") {
		e.Params.Digest, e.Params.Hiding = d.paramsDigest("params_digest")
		e.Params.Size = int(d.uint("params_size"))
	}
	for _, ttl := range []struct {
		name string
		to   *time.Duration
	}{{"pending_ttl_ms", &e.PendingTTL}, {"execution_ttl_ms", &e.ExecutionTTL}} {
		if has(ttl.name) {
			ms := d.uint(ttl.name)
			if ms > uint64(MaxTTL.Milliseconds()) {
				d.fail(ttl.name, "longer than %d ms", MaxTTL.Milliseconds())
			}
			*ttl.to = time.Duration(ms) * time.Millisecond
		}
	}
}
