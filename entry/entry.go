package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// Entry format versions. Version 2 adds definition_digest, the digest of
// the action definition the ledger applied; an entry without one is
// written as version 1, byte for byte what version 1 readers expect.
// Version 3 adds kind: a decision the ledger itself made with a policy set
// (which it names by digest, with the ids of policies that errored), or
// the publication of a policy set. Mediator-decided entries stay version 1
// or 2, so the two are told apart by version. This package reads and
// writes all three.
const (
	Version1 = 1
	Version2 = 2
	Version3 = 3
	// Version is the newest version this package reads and writes.
	Version = Version3
)

// Kind is what a version 3 entry records.
type Kind string

const (
	// KindDecision is a decision the ledger made by evaluating the policy
	// set named by PolicySet (POST /v1/decide).
	KindDecision Kind = "decision"
	// KindPolicySet publishes the policy set named by PolicySet: from this
	// entry on, the ledger may decide with it.
	KindPolicySet Kind = "policy_set"
)

// SignedDomainSeparator prefixes the canonical unsigned entry in the signed
// message of a version 1 entry, so that an entry signature can never be
// taken for a signature over anything else (checkpoints are signed notes,
// with their own form). SignedDomainSeparatorV2 does so for version 2, so
// that no signature of one version verifies as the other.
const (
	SignedDomainSeparator   = "ledger/v1/entry\n"
	SignedDomainSeparatorV2 = "ledger/v2/entry\n"
	SignedDomainSeparatorV3 = "ledger/v3/entry\n"
)

// TimeLayout is the only accepted spelling of an entry's time: UTC, with
// exactly six fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Bounds on an entry's parts. They keep one entry small enough to sign,
// store and verify quickly, and an attacker's entry from costing more.
const (
	// MaxEntryBytes fits the uint16 length prefix of C2SP tlog-tiles
	// entry bundles, so that every entry can be served as a tile.
	MaxEntryBytes      = 1<<16 - 1 // the whole signed entry
	MaxAttributesBytes = 32 << 10  // the canonical attributes object
	MaxStringBytes     = 1024      // origin, mediator, principal, action, key id, each policy id
	MaxPolicies        = 256
)

// Decision is the mediator's verdict on an action.
type Decision string

const (
	Allow         Decision = "allow"
	Deny          Decision = "deny"
	NeedsApproval Decision = "needs_approval"
)

func (d Decision) valid() bool { return d == Allow || d == Deny || d == NeedsApproval }

// Entry is one decision in the ledger. The fields are those of the JSON
// object; docs/entry.md specifies each. Its strings (Origin, Mediator,
// Principal, Action, Decision, each policy id, KeyID) are identifiers: they
// hold no control or format character (docs/entry.md §1.1); Attributes may
// hold any text. Its methods remember the last attributes they found
// canonical, so they must not run concurrently on one Entry.
type Entry struct {
	Origin    string
	Index     uint64
	Time      time.Time // truncated to microseconds, UTC
	Mediator  string    // from the mediator's credential, never from a request body
	Principal string
	Action    string
	Decision  Decision
	// Policies are the ids of the determining policies, sorted in byte
	// order, without repeats.
	Policies []string
	// Params commits to the action's full raw parameters.
	Params commit.Commitment
	// Tiers is the applied-tiers digest: the disclosure rules applied.
	Tiers commit.Digest
	// Definition is the action definition digest (package
	// commit/declare) of the declaration the ledger checked the decision
	// against; zero if none. A non-zero Definition makes a version 2
	// entry.
	Definition commit.Digest
	// Kind is empty for a decision a mediator made (versions 1 and 2);
	// KindDecision or KindPolicySet make a version 3 entry. A
	// KindPolicySet entry has only Origin, Index, Time, PolicySet, Prev,
	// KeyID and Signature; every decision field is zero.
	Kind Kind
	// PolicySet is the policy-set digest (package policy) of the set that
	// decided (KindDecision) or is published (KindPolicySet); zero in
	// versions 1 and 2. The ledger derives it, never a request.
	PolicySet commit.Digest
	// PolicyErrors are the ids of the policies whose evaluation failed,
	// sorted in byte order without repeats (KindDecision only). Failing
	// closed, a decision with any is deny and lists them in Policies too.
	PolicyErrors []string
	// The version 4 members (approval.go; docs/approvals.md), each zero
	// in entries of other kinds. ApprovalID is the approval's id: the
	// entry hash of the request, the needs_approval decision at index
	// Request. Consumption is the index of the consumption an outcome
	// reports on. PendingTTL and ExecutionTTL are whole milliseconds.
	// An outcome (KindOutcome) without an ApprovalID is a version 5
	// outcome (outcome.go): it reports on the act that the allow decision
	// at index DecisionIndex permitted; DecisionIndex is zero in every
	// other entry.
	ApprovalID    commit.Digest
	Request       uint64
	Approver      string
	Verdict       Verdict
	PreviewDigest commit.Digest
	Consumption   uint64
	DecisionIndex uint64
	Result        Result
	OperationID   string
	PendingTTL    time.Duration
	ExecutionTTL  time.Duration
	// Attributes is the canonical JSON object of the minimized attributes.
	Attributes []byte
	// Prev is the entry hash of the entry at Index-1; zero at index 0.
	Prev commit.Digest
	// KeyID names the signing key: "<name>+<8 hex digits>", the name and
	// key hash of its note verifier key.
	KeyID     string
	Signature []byte // Ed25519, 64 bytes; nil before signing

	// canonicalAttributes is a copy of the last Attributes found in the
	// strict domain and canonical, so that signing an entry after building
	// it does not parse its attributes again. It is compared by value, so
	// changing Attributes in any way brings the full check back.
	canonicalAttributes []byte
}

// Errors. Malformed entries give a *FieldError (errors.Is ErrMalformed) or
// ErrNotCanonical; a signature that does not verify gives ErrSignature. An
// identifier holding a control or format character gives a *FieldError
// that is also errors.Is ErrIdentifierChar.
var (
	ErrMalformed      = errors.New("malformed entry")
	ErrNotCanonical   = errors.New("entry: not in canonical form (RFC 8785)")
	ErrSignature      = errors.New("entry: signature does not verify")
	ErrKeyID          = errors.New("entry: signed by another key")
	ErrIdentifierChar = fmt.Errorf("%w: control or format character in an identifier", ErrMalformed)
)

// FieldError says which field of an entry is wrong and how. It never holds
// the field's value.
type FieldError struct {
	Field   string // JSON member name; "" for the entry as a whole
	Problem string
	// Err, if not nil, classifies the problem (ErrIdentifierChar); it
	// wraps ErrMalformed, so that the error is errors.Is ErrMalformed in
	// any case.
	Err error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "entry: " + e.Problem
	}
	return fmt.Sprintf("entry: field %q: %s", e.Field, e.Problem)
}

func (e *FieldError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrMalformed
}

func fieldError(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// check validates every field but the signature.
func (e *Entry) check() error {
	if e.Index > commit.MaxSafeInteger {
		return fieldError("index", "beyond 2^53-1")
	}
	if e.Time.IsZero() || e.Time.Year() < 1 || e.Time.Year() > 9999 {
		return fieldError("time", "outside years 0001-9999")
	}
	if e.Version() == Version5 {
		return e.checkV5()
	}
	if e.DecisionIndex != 0 {
		return fieldError("decision", "an entry index only in a version 5 outcome")
	}
	if e.Kind.isVersion4() {
		return e.checkV4()
	}
	if e.ApprovalID != (commit.Digest{}) || e.Request != 0 || e.Approver != "" || e.Verdict != "" ||
		e.PreviewDigest != (commit.Digest{}) || e.Consumption != 0 || e.Result != "" || e.OperationID != "" ||
		e.PendingTTL != 0 || e.ExecutionTTL != 0 {
		return fieldError("kind", "approval members need a version 4 kind")
	}
	if err := checkIDList("policies", e.Policies); err != nil {
		return err
	}
	switch e.Kind {
	case "":
		if e.PolicySet != (commit.Digest{}) || len(e.PolicyErrors) > 0 {
			return fieldError("kind", "policy_set and policy_errors need a version 3 kind")
		}
	case KindPolicySet:
		return e.checkPublication()
	case KindDecision:
		if e.Definition == (commit.Digest{}) {
			return fieldError("definition_digest", "missing: a ledger decision names its action definition")
		}
		if e.PolicySet == (commit.Digest{}) {
			return fieldError("policy_set", "all zeros: a ledger decision names its policy set")
		}
		if err := checkIDList("policy_errors", e.PolicyErrors); err != nil {
			return err
		}
		if len(e.PolicyErrors) > 0 && e.Decision != Deny {
			return fieldError("policy_errors", "a decision with erroring policies is deny (fail closed)")
		}
		for _, id := range e.PolicyErrors {
			if _, found := slices.BinarySearch(e.Policies, id); !found {
				return fieldError("policy_errors", "an erroring policy is not among the determining policies (fail closed)")
			}
		}
	default:
		return fieldError("kind", "not a known kind")
	}
	if !e.Decision.valid() {
		return fieldError("decision", "not allow, deny or needs_approval")
	}
	if e.Params.Size < e.Params.MinSize() || e.Params.Size > commit.MaxSafeInteger {
		return fieldError("params_size", "not a canonical object size")
	}
	if len(e.Attributes) > MaxAttributesBytes {
		return fieldError("attributes", "longer than %d bytes", MaxAttributesBytes)
	}
	if len(e.Attributes) < 2 || e.Attributes[0] != '{' {
		return fieldError("attributes", "not a JSON object")
	}
	if e.canonicalAttributes != nil && bytes.Equal(e.canonicalAttributes, e.Attributes) {
		return nil
	}
	canonical, err := canonicalAttributes(e.Attributes)
	if err != nil {
		return err
	}
	if !bytes.Equal(canonical, e.Attributes) {
		return fieldError("attributes", "not in canonical form")
	}
	e.canonicalAttributes = canonical
	return nil
}

// checkIDList checks a list of policy ids: at most MaxPolicies, sorted
// in byte order without repeats. (Each id is checked as an identifier
// when it is encoded.)
func checkIDList(field string, ids []string) error {
	if len(ids) > MaxPolicies {
		return fieldError(field, "more than %d", MaxPolicies)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return fieldError(field, "not sorted in byte order without repeats (at %d)", i)
		}
	}
	return nil
}

// checkPublication checks a KindPolicySet entry: a policy-set digest and
// none of a decision's fields.
func (e *Entry) checkPublication() error {
	if e.PolicySet == (commit.Digest{}) {
		return fieldError("policy_set", "all zeros: a publication names its policy set")
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"action", e.Action != ""}, {"attributes", e.Attributes != nil}, {"decision", e.Decision != ""},
		{"definition_digest", e.Definition != (commit.Digest{})}, {"mediator", e.Mediator != ""},
		{"params_digest", e.Params != (commit.Commitment{})}, {"policies", e.Policies != nil},
		{"policy_errors", e.PolicyErrors != nil}, {"principal", e.Principal != ""},
		{"tiers_digest", e.Tiers != (commit.Digest{})},
	} {
		if f.set {
			return fieldError(f.name, "not a member of a policy_set entry")
		}
	}
	return nil
}

// canonicalAttributes returns the canonical form of an attributes object
// or a *FieldError naming where it leaves the strict domain. The domain is
// the one Parse reads attributes in (attributesDomain: the entry encloses
// them, so they nest one level less deep than a document alone), so that
// every entry written can be read back.
func canonicalAttributes(attrs []byte) ([]byte, error) {
	// Attributes mostly arrive canonical already (a client minimized
	// them, or the API's strict reader wrote them): plainCanonical says so
	// of the plainest without parsing them into a new form.
	if len(attrs) <= MaxAttributesBytes && len(attrs) >= 2 && attrs[0] == '{' && plainCanonical(attrs) {
		return bytes.Clone(attrs), nil
	}
	canonical, err := attributesDomain.Canonicalize(attrs)
	if err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return nil, fieldError("attributes", "%s at %q", de.Kind, de.Pointer)
		}
		return nil, fieldError("attributes", "%v", err)
	}
	if len(canonical) < 2 || canonical[0] != '{' {
		return nil, fieldError("attributes", "not a JSON object")
	}
	if len(canonical) > MaxAttributesBytes {
		return nil, fieldError("attributes", "longer than %d bytes", MaxAttributesBytes)
	}
	return canonical, nil
}

// SetAttributes sets Attributes to the canonical form of attrs, which must
// be a JSON object in the strict domain of package commit, or returns a
// *FieldError saying where it is not. The entry remembers the result as
// checked.
func (e *Entry) SetAttributes(attrs []byte) error {
	canonical, err := canonicalAttributes(attrs)
	if err != nil {
		return err
	}
	// The remembered copy must not share Attributes' array, or a change
	// in place would change both.
	e.Attributes, e.canonicalAttributes = canonical, bytes.Clone(canonical)
	return nil
}

// appendJSON appends the canonical JSON of e, with or without its
// signature. Members are written in RFC 8785 order (all names are ASCII, so
// byte order is UTF-16 order).
//
// If at is not nil, it is set to where the values of index, prev and time
// begin in b (for a Template); a version 4 entry leaves it unset.
func (e *Entry) appendJSON(b []byte, withSignature bool, at *chainAt) ([]byte, error) {
	if v := e.Version(); v == Version5 {
		return e.appendMembers(b, fieldsV5(e.OperationID != ""), Version5, withSignature)
	} else if v == Version4 {
		return e.appendMembers(b, fieldsV4(e.Kind, e.OperationID != ""), Version4, withSignature)
	}
	var err error
	str := func(field, s string, required bool) {
		if err != nil {
			return
		}
		if required && s == "" {
			err = fieldError(field, "empty")
			return
		}
		if len(s) > MaxStringBytes {
			err = fieldError(field, "longer than %d bytes", MaxStringBytes)
			return
		}
		var de error
		if b, de = commit.AppendString(b, s); de != nil {
			var k *commit.DomainError
			errors.As(de, &k)
			err = fieldError(field, "%s", k.Kind)
			return
		}
		// Every string member written here is an identifier.
		if r, at, found := refusedRune(s); found {
			err = &FieldError{Field: field, Err: ErrIdentifierChar,
				Problem: fmt.Sprintf("%U at byte %d: identifiers hold no control or format characters", r, at)}
		}
	}
	ids := func(field string, list []string) {
		b = append(b, `,"`...)
		b = append(b, field...)
		b = append(b, `":[`...)
		for i, p := range list {
			if i > 0 {
				b = append(b, ',')
			}
			str(field, p, true)
		}
		b = append(b, ']')
	}
	digest := func(field string, d commit.Digest) {
		b = append(b, `,"`...)
		b = append(b, field...)
		b = append(b, `":"`...)
		b, _ = d.AppendText(b)
		b = append(b, '"')
	}
	decision := e.Kind != KindPolicySet
	if decision {
		b = append(b, `{"action":`...)
		str("action", e.Action, true)
		b = append(b, `,"attributes":`...)
		b = append(b, e.Attributes...)
		b = append(b, `,"decision":`...)
		str("decision", string(e.Decision), true)
		if e.Version() != Version1 {
			digest("definition_digest", e.Definition)
		}
		b = append(b, `,"index":`...)
	} else {
		b = append(b, `{"index":`...)
	}
	if at != nil {
		at.index = len(b)
	}
	b = strconv.AppendUint(b, e.Index, 10)
	if at != nil {
		at.indexEnd = len(b)
	}
	b = append(b, `,"key_id":`...)
	str("key_id", e.KeyID, true)
	if e.Kind != "" {
		b = append(b, `,"kind":"`...)
		b = append(b, e.Kind...) // one of two ASCII words, checked
		b = append(b, '"')
	}
	if decision {
		b = append(b, `,"mediator":`...)
		str("mediator", e.Mediator, true)
	}
	b = append(b, `,"origin":`...)
	str("origin", e.Origin, true)
	if decision {
		b = append(b, `,"params_digest":"`...)
		b = e.Params.AppendDigestText(b)
		b = append(b, `","params_size":`...)
		b = strconv.AppendInt(b, int64(e.Params.Size), 10)
		ids("policies", e.Policies)
		if e.Kind == KindDecision {
			ids("policy_errors", e.PolicyErrors)
		}
	}
	if e.Kind != "" {
		digest("policy_set", e.PolicySet)
	}
	if at != nil {
		at.prev = len(b) + len(`,"prev":"`)
	}
	digest("prev", e.Prev)
	if decision {
		b = append(b, `,"principal":`...)
		str("principal", e.Principal, true)
	}
	if withSignature {
		if len(e.Signature) != ed25519.SignatureSize {
			return nil, fieldError("sig", "not a %d-byte Ed25519 signature", ed25519.SignatureSize)
		}
		b = append(b, `,"sig":"`...)
		b = base64.StdEncoding.AppendEncode(b, e.Signature)
		b = append(b, '"')
	}
	if decision {
		digest("tiers_digest", e.Tiers)
	}
	b = append(b, `,"time":"`...)
	if at != nil {
		at.time = len(b)
	}
	b = e.Time.UTC().AppendFormat(b, TimeLayout)
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, int64(e.Version()), 10)
	b = append(b, '}')
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Version returns the format version e is written in: 5 if it is an
// outcome without an approval id, 4 if it has another approval kind (or
// is an outcome with one), 3 if it has another kind, 2 if it names an
// action definition, 1 otherwise.
func (e *Entry) Version() int {
	switch {
	case e.Kind == KindOutcome && e.ApprovalID == (commit.Digest{}):
		return Version5
	case e.Kind.isVersion4():
		return Version4
	case e.Kind != "":
		return Version3
	case e.Definition != (commit.Digest{}):
		return Version2
	}
	return Version1
}

func (e *Entry) separator() string {
	switch e.Version() {
	case Version5:
		return SignedDomainSeparatorV5
	case Version4:
		return SignedDomainSeparatorV4
	case Version3:
		return SignedDomainSeparatorV3
	case Version2:
		return SignedDomainSeparatorV2
	}
	return SignedDomainSeparator
}

// SignedMessage returns the message an entry's signature covers:
//
//	"ledger/v1/entry\n" || JCS(entry without "sig")    (version 1)
//	"ledger/v2/entry\n" || JCS(entry without "sig")    (version 2)
//	"ledger/v3/entry\n" || JCS(entry without "sig")    (version 3)
//	"ledger/v4/entry\n" || JCS(entry without "sig")    (version 4)
//	"ledger/v5/entry\n" || JCS(entry without "sig")    (version 5)
func (e *Entry) SignedMessage() ([]byte, error) {
	return e.AppendSignedMessage(make([]byte, 0, e.sizeHint()))
}

// AppendSignedMessage appends the signed message to b, as SignedMessage
// returns it, so that a caller checking an entry can reuse a buffer.
func (e *Entry) AppendSignedMessage(b []byte) ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	sep := e.separator()
	start := len(b)
	b = append(b, sep...)
	b, err := e.appendJSON(b, false, nil)
	if err != nil {
		return nil, err
	}
	// The bound is on the signed entry, which adds the "sig" member to
	// this message: checking it here refuses an entry before it is
	// signed, not after.
	if len(b)-start-len(sep)+len(sigMember) > MaxEntryBytes {
		return nil, fieldError("", "the signed entry would be longer than %d bytes", MaxEntryBytes)
	}
	return b, nil
}

// sizeHint is the length of the signed message, unless strings need
// escapes: the variable parts plus every name, digest and number at its
// longest.
func (e *Entry) sizeHint() int {
	n := 640 + len(e.Attributes) + len(e.Action) + len(e.Decision) + len(e.KeyID) +
		len(e.Mediator) + len(e.Origin) + len(e.Principal)
	for _, p := range e.Policies {
		n += len(p) + 3
	}
	for _, p := range e.PolicyErrors {
		n += len(p) + 3
	}
	if e.Kind != "" {
		n += 128 // kind, policy_errors, policy_set
	}
	return n
}

// sigMember is the length the "sig" member adds to an entry:
// ,"sig":"<88 base64 characters>".
var sigMember = `,"sig":""` + strings.Repeat("=", base64.StdEncoding.EncodedLen(ed25519.SignatureSize))

// Hash returns the entry hash, SHA-256 of the signed message. The next
// entry's Prev is this hash. It does not cover the signature, so the chain
// can be built before (and independently of) signing.
func (e *Entry) Hash() (commit.Digest, error) {
	m, err := e.SignedMessage()
	if err != nil {
		return commit.Digest{}, err
	}
	return sha256.Sum256(m), nil
}

// Sign sets e.KeyID and signs e with sign, which returns the Ed25519
// signature of its argument. It returns the entry hash.
func (e *Entry) Sign(keyID string, sign func(message []byte) []byte) (commit.Digest, error) {
	e.KeyID = keyID
	m, err := e.SignedMessage()
	if err != nil {
		return commit.Digest{}, err
	}
	e.Signature = sign(m)
	return sha256.Sum256(m), nil
}

// Verify checks that e was signed by the key keyID with public key pub.
func (e *Entry) Verify(keyID string, pub ed25519.PublicKey) error {
	if e.KeyID != keyID {
		return ErrKeyID
	}
	m, err := e.SignedMessage()
	if err != nil {
		return err
	}
	if len(e.Signature) != ed25519.SignatureSize || !ed25519.Verify(pub, m, e.Signature) {
		return ErrSignature
	}
	return nil
}

// Marshal returns the signed entry in canonical JSON: the bytes that are
// stored, exported, and hashed as the entry's Merkle leaf.
func (e *Entry) Marshal() ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	b, err := e.appendJSON(make([]byte, 0, 600+len(e.Attributes)), true, nil)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxEntryBytes {
		return nil, fieldError("", "longer than %d bytes", MaxEntryBytes)
	}
	return b, nil
}

// sigFollower is the member that follows "sig" in a decision's canonical
// form, sigFollowerPublication in the other kinds' (which have no
// tiers_digest and no attributes). Each is the last occurrence of its bytes in a signed
// message: the members after it (time, version) cannot contain it, and
// inside strings quotes are escaped.
const (
	sigFollower            = `,"tiers_digest":"`
	sigFollowerPublication = `,"time":"`
)

// sigAt returns where the "sig" member goes in body, a signed message
// less its domain separator: before its sigFollower, or before its
// sigFollowerPublication if it has none; -1 if it has neither.
func sigAt(body []byte) int {
	if at := bytes.LastIndex(body, []byte(sigFollower)); at >= 0 {
		return at
	}
	// No tiers_digest: a policy_set, version 4 or 5 entry.
	return bytes.LastIndex(body, []byte(sigFollowerPublication))
}

// signedDomainSeparators are the domain separators a signed message may
// begin with, one a version.
var signedDomainSeparators = []string{
	SignedDomainSeparator, SignedDomainSeparatorV2, SignedDomainSeparatorV3, SignedDomainSeparatorV4, SignedDomainSeparatorV5,
}

// SignedEntry returns the entry's bytes, as Marshal would after setting
// Signature to sig, from a message SignedMessage returned: it inserts the
// "sig" member into the message instead of checking and encoding every
// field again, which is the cost of Marshal.
func SignedEntry(message, sig []byte) ([]byte, error) {
	if len(sig) != ed25519.SignatureSize {
		return nil, fieldError("sig", "not a %d-byte Ed25519 signature", ed25519.SignatureSize)
	}
	// Cut and searched as bytes: a string(message) would copy the
	// message once per separator tried.
	var body []byte
	ok := false
	for _, sep := range signedDomainSeparators {
		if body, ok = bytes.CutPrefix(message, []byte(sep)); ok {
			break
		}
	}
	at := sigAt(body)
	if !ok || at < 0 {
		return nil, fmt.Errorf("%w: not a signed message", ErrMalformed)
	}
	b := make([]byte, 0, len(body)+len(sigMember))
	b = append(b, body[:at]...)
	b = append(b, `,"sig":"`...)
	b = base64.StdEncoding.AppendEncode(b, sig)
	b = append(b, '"')
	b = append(b, body[at:]...)
	if len(b) > MaxEntryBytes {
		return nil, fieldError("", "longer than %d bytes", MaxEntryBytes)
	}
	return b, nil
}

// LeafHash returns the RFC 6962 leaf hash of an entry's bytes:
// SHA-256(0x00 || entry).
func LeafHash(entry []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(entry)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// SortPolicies returns ids sorted in byte order without repeats, as an
// entry requires.
func SortPolicies(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
