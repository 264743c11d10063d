// Package client is the mediators' Go client for ledgerd (docs/api.md).
// It appends decisions with an idempotency key, retrying safely on
// overload and network errors, and it verifies what it receives: every
// receipt's entry (strict encoding, the ledger's signature, and that it
// records exactly the decision sent), entries, checkpoints, tlog-proof
// files, and inclusion and consistency proofs, trusting nothing but the
// ledger's verifier key. cmd/ledgerctl is its command-line front end.
//
// # Key rotation
//
// After the ledger's key is rotated (docs/operations.md §Key rotation),
// entries before the rotation carry the old key's id and entries after it
// the new key's. A client made by NewWithKeys trusts a key set
// (verify.NewKeySet, verify.ParseKeys): each entry is checked with the
// trusted key its key_id names, so it verifies the entries before the
// rotation and the receipts after it. As ledger-verify does along a range
// (verify.ErrRetiredKey), the client holds the ledger to the rule that
// the old key never signs again: each key signs one run of consecutive
// entries. It records the lowest and highest index of the entries each
// key signed among those it verified (receipts, Entry, TlogProof), and
// refuses an entry, a fresh receipt above all, by a key that another key
// replaced at a lower index. It can only apply the rule to what it has
// seen: a client that has verified no entry by the new key cannot tell a
// receipt by the old key after the rotation from one before it.
//
// # Approvals
//
// When the ledger decides needs_approval (docs/approvals.md) and has
// approvals on, the decision opens an approval, and the receipt's
// Approval names it: its id (the decision entry's hash), its pending
// deadline and the digest of the preview approvers see. A Decision or
// Request may carry a Preview document; the client renders it as ledgerd
// will (package approval/preview: redacted, then bounded) and checks the
// digest the answer names. A mediator then:
//
//  1. waits for a person's verdict: WaitApproval polls Approval (GET
//     /v1/approvals/{id}, the server's unsigned account) and, once there
//     is a verdict, fetches its entry and verifies that it is the
//     ledger's signed verdict on this approval;
//  2. on approve, spends the approval with Consume, repeating the
//     request's Terms exactly, and acts only on the verified receipt of
//     the consumption — one consumption per approval, before the
//     execution deadline, or a refusal (*Error with Code and Term);
//  3. reports what happened with Outcome (succeeded, failed or unknown,
//     with the downstream operation id if any).
//
// Consume and Outcome retry as Append does, with one idempotency key.
// Every receipt is verified against the ledger's key and what was sent;
// an answer that does not verify is ErrUnverified. What the client
// cannot verify — the pending TTL, a default preview's digest, expiry,
// the mediator name its token stands for — each method's comment says.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Client talks to one ledgerd.
type Client struct {
	baseURL string
	token   string
	key     *verify.Key
	runs    *keyRuns
	// HTTP is the HTTP client. Optional; default http.DefaultClient.
	HTTP *http.Client
	// MaxAttempts bounds the tries of one append. Optional; default 5.
	MaxAttempts int
	// Backoff is the wait before the second try, doubled after each;
	// a server's Retry-After takes precedence. Optional; default 100 ms.
	Backoff time.Duration
}

// New returns a client for the ledgerd at baseURL ("http://host:port"),
// authenticating with a mediator token and verifying with the ledger's
// note verifier key. After a key rotation, NewWithKeys trusts the old key
// too, for the entries it signed.
func New(baseURL, token, verifierKey string) (*Client, error) {
	key, err := verify.ParseKey(verifierKey)
	if err != nil {
		return nil, err
	}
	return NewWithKeys(baseURL, token, key)
}

// NewWithKeys is New trusting the key set keys (verify.NewKeySet,
// verify.ParseKeys, verify.ParseTrust): the ledger's current key and
// the keys it rotated out, as the package doc's Key rotation says. A
// checkpoint must be signed by at least one of them. A key's witness
// policy (verify.Key.WithWitnesses) applies to checkpoints as in package
// verify.
func NewWithKeys(baseURL, token string, keys *verify.Key) (*Client, error) {
	if keys == nil {
		return nil, errors.New("client: no verifier key")
	}
	return &Client{baseURL: strings.TrimSuffix(baseURL, "/"), token: token, key: keys,
		runs: &keyRuns{runs: map[string]keyRun{}}}, nil
}

// keyRun is the lowest and highest index of the entries one key signed,
// among those a client verified.
type keyRun struct{ first, last uint64 }

// keyRuns holds a client's keyRun of each key.
type keyRuns struct {
	mu   sync.Mutex
	runs map[string]keyRun
}

// add records that keyID signed the entry at index, or refuses the entry
// (verify.ErrRetiredKey) if that breaks the rule that each key signs one
// run of consecutive entries: another key signed an entry between it and
// one the key signed before.
func (k *keyRuns) add(index uint64, keyID string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.runs[keyID]
	if !ok {
		r = keyRun{index, index}
	}
	r.first, r.last = min(r.first, index), max(r.last, index)
	for other, o := range k.runs {
		if other == keyID || o.last < r.first || r.last < o.first {
			continue
		}
		if index > o.last { // keyID signed before other, and again after
			return fmt.Errorf("%w: entry %d is signed by key %s, but key %s signed entry %d after that key's entry %d: an old key must never sign again",
				verify.ErrRetiredKey, index, keyID, other, o.last, r.first)
		}
		return fmt.Errorf("%w: entry %d is signed by key %s, which signed entry %d too, but key %s signed entry %d between them: an old key must never sign again",
			verify.ErrRetiredKey, index, keyID, r.last, other, o.first)
	}
	k.runs[keyID] = r
	return nil
}

// verifyEntry checks an entry's signature with the trusted key its key_id
// names, and that the key may sign at the entry's index (keyRuns.add).
func (c *Client) verifyEntry(e *entry.Entry) error {
	if err := c.key.VerifyEntry(e); err != nil {
		return err
	}
	return c.runs.add(e.Index, e.KeyID)
}

// Decision is what a mediator records about one action.
type Decision struct {
	Principal  string
	Action     string
	Decision   entry.Decision
	Policies   []string
	Params     commit.Commitment
	Tiers      commit.Digest
	Attributes json.RawMessage // a JSON object
	// Preview is the preview document shown to the approver if the
	// decision is needs_approval (docs/approvals.md §Previews): any JSON
	// value in the strict domain, at most 1 MiB; the ledger redacts and
	// bounds it. Optional; sent only with a needs_approval decision (the
	// ledger refuses it with another). Its raw form never enters the log.
	Preview json.RawMessage
}

// Receipt is a verified acknowledgement of a durable entry.
type Receipt struct {
	Index    uint64
	Entry    *entry.Entry
	Raw      []byte // the signed entry's bytes
	Replayed bool   // the idempotency key named an entry appended before
	// Approval is the approval a needs_approval decision opened, when the
	// ledger has approvals on; nil otherwise, and on receipts of
	// consumptions and outcomes.
	Approval *OpenedApproval
}

// Error is a refusal by the server: its HTTP status and error code.
type Error struct {
	Status  int
	Code    string
	Message string
	// Term names the term of an approval that differs, for the lifecycle
	// refusals that have one (approval_mismatch, approval_digest_mismatch):
	// action, principal, mediator, approval, params_digest or
	// params_size. Empty otherwise.
	Term string
}

func (e *Error) Error() string {
	if e.Term != "" {
		return fmt.Sprintf("ledgerd: %d %s (%s): %s", e.Status, e.Code, e.Term, e.Message)
	}
	return fmt.Sprintf("ledgerd: %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrUnverified: the server's answer does not verify; it is not to be
// trusted.
var ErrUnverified = errors.New("client: the ledger's answer does not verify")

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Append appends d and returns its verified receipt. All attempts carry
// one random idempotency key, so a retry after a lost answer never appends
// twice. It retries on 429, 503 and network errors, waiting as the
// server's Retry-After says or with exponential backoff, until ctx ends or
// MaxAttempts is reached; other refusals are returned at once as *Error.
func (c *Client) Append(ctx context.Context, d Decision) (*Receipt, error) {
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	return c.AppendIdempotent(ctx, hex.EncodeToString(keyBytes), d)
}

// MaxIdempotencyKey bounds an idempotency key (docs/api.md).
const MaxIdempotencyKey = 128

// ErrIdempotencyKey: an idempotency key is not 1 to MaxIdempotencyKey
// printable ASCII characters (no space). Nothing was sent.
var ErrIdempotencyKey = errors.New("client: an idempotency key is 1 to 128 printable ASCII characters, without spaces")

// AppendIdempotent is Append with the caller's idempotency key, which
// makes the append safe to repeat beyond one call, in this process or
// another: while the key names an entry the same mediator appended, with
// the same decision, the server appends nothing and answers with that
// entry, so the receipt is marked Replayed. The same key with another
// decision is refused (*Error, code idempotency_conflict).
func (c *Client) AppendIdempotent(ctx context.Context, idempotencyKey string, d Decision) (*Receipt, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return nil, err
	}
	shown, err := renderPreview(d.Preview)
	if err != nil {
		return nil, err
	}
	req := map[string]any{
		"principal": d.Principal, "action": d.Action, "decision": d.Decision,
		"policies": nonNil(d.Policies), "params_digest": d.Params.DigestText(), "params_size": d.Params.Size,
		"tiers_digest": d.Tiers, "attributes": d.Attributes,
	}
	if shown != nil {
		req["preview"] = d.Preview
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, b, err := c.post(ctx, "append", "/v1/entries", idempotencyKey, body)
	if err != nil {
		return nil, err
	}
	return c.checkReceipt(b, d, shown, status == http.StatusOK)
}

// checkKey refuses an idempotency key outside the server's rules.
func checkKey(idempotencyKey string) error {
	if idempotencyKey == "" || len(idempotencyKey) > MaxIdempotencyKey ||
		strings.IndexFunc(idempotencyKey, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return ErrIdempotencyKey
	}
	return nil
}

// post sends body to path with the idempotency key, retrying on 429, 503
// and network errors as Append says, and returns the status (200 or 201)
// and body of the answer; another status is returned as *Error. what
// names the request in errors.
func (c *Client) post(ctx context.Context, what, path, idempotencyKey string, body []byte) (int, []byte, error) {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = 5
	}
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = 100 * time.Millisecond
	}
	var lastErr error
	for attempt := range attempts {
		if attempt > 0 {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return 0, nil, fmt.Errorf("client: %s to %s: %w", what, c.baseURL+path, ctx.Err())
			}
			backoff *= 2
		}
		req, err := http.NewRequestWithContext(ctx, "POST", c.baseURL+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Idempotency-Key", idempotencyKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http().Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil, fmt.Errorf("client: %s to %s: %w", what, c.baseURL+path, ctx.Err())
			}
			lastErr = err
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = err
			continue
		}
		switch resp.StatusCode {
		case http.StatusCreated, http.StatusOK:
			return resp.StatusCode, b, nil
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			lastErr = apiError(resp.StatusCode, b)
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				backoff = time.Duration(s) * time.Second
			}
			continue
		default:
			return 0, nil, apiError(resp.StatusCode, b)
		}
	}
	return 0, nil, fmt.Errorf("client: %s failed after %d attempts: %w", what, attempts, lastErr)
}

// Request is what a mediator asks the ledger to decide (POST
// /v1/decide): a Decision without its decision and policies, which the
// ledger's policy set derives.
type Request struct {
	Principal  string
	Action     string
	Params     commit.Commitment
	Tiers      commit.Digest
	Attributes json.RawMessage // a JSON object
	// Preview is the preview document shown to the approver if the ledger
	// decides needs_approval, as Decision.Preview says. Optional; the
	// ledger drops it (stores nothing) if it decides otherwise.
	Preview json.RawMessage
}

// Decided is the ledger's verified decision on a Request and the receipt
// of the entry that records it.
type Decided struct {
	Decision entry.Decision
	// Policies are the determining policy ids, PolicyErrors those whose
	// evaluation failed (the decision is then deny), each sorted.
	Policies     []string
	PolicyErrors []string
	// PolicySet is the digest of the policy set that decided: GET
	// /v1/policies/{digest} serves it.
	PolicySet commit.Digest
	Receipt
}

// Decide asks the ledger to decide d and record its decision, and returns
// the verified answer. It retries as Append does, with one random
// idempotency key, so a retry never records twice and always answers the
// first decision. A ledger without policies refuses with *Error, code
// no_policies.
func (c *Client) Decide(ctx context.Context, d Request) (*Decided, error) {
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	return c.DecideIdempotent(ctx, hex.EncodeToString(keyBytes), d)
}

// DecideIdempotent is Decide with the caller's idempotency key: while the
// key names a decision the ledger recorded for the same request, the
// ledger records nothing and answers that first decision (Replayed),
// even if its policy set now decides otherwise. The same key with another
// request is refused (*Error, code idempotency_conflict).
func (c *Client) DecideIdempotent(ctx context.Context, idempotencyKey string, d Request) (*Decided, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return nil, err
	}
	shown, err := renderPreview(d.Preview)
	if err != nil {
		return nil, err
	}
	req := map[string]any{
		"principal": d.Principal, "action": d.Action, "params_digest": d.Params.DigestText(), "params_size": d.Params.Size,
		"tiers_digest": d.Tiers, "attributes": d.Attributes,
	}
	if shown != nil {
		req["preview"] = d.Preview
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, b, err := c.post(ctx, "decide", "/v1/decide", idempotencyKey, body)
	if err != nil {
		return nil, err
	}
	return c.checkDecided(b, d, shown, status == http.StatusOK)
}

// checkDecided verifies a decide answer: the entry is strictly valid,
// signed by the ledger's key, at the index claimed, records exactly the
// request, and is a version 3 ledger decision whose decision, ids and
// policy set are the answer's; an opened approval is checked as
// checkOpened says.
func (c *Client) checkDecided(body []byte, d Request, shown *commit.Digest, replayed bool) (*Decided, error) {
	var r struct {
		Approval     json.RawMessage `json:"approval"`
		Decision     entry.Decision  `json:"decision"`
		Policies     []string        `json:"policies"`
		PolicyErrors []string        `json:"policy_errors"`
		PolicySet    string          `json:"policy_set"`
		Index        uint64          `json:"index"`
		Entry        json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Policies == nil || r.PolicyErrors == nil {
		return nil, fmt.Errorf("%w: malformed decide answer", ErrUnverified)
	}
	set, err := commit.ParseDigest(r.PolicySet)
	if err != nil {
		return nil, fmt.Errorf("%w: policy_set: %w", ErrUnverified, err)
	}
	e, err := c.checkEntry(r.Entry, r.Index, d)
	if err != nil {
		return nil, err
	}
	if e.Version() != entry.Version3 || e.Kind != entry.KindDecision {
		return nil, fmt.Errorf("%w: the entry is not a decision the ledger made (version 3, kind decision)", ErrUnverified)
	}
	if e.Decision != r.Decision || !slices.Equal(e.Policies, r.Policies) ||
		!slices.Equal(nonNil(e.PolicyErrors), r.PolicyErrors) || e.PolicySet != set {
		return nil, fmt.Errorf("%w: the answer's decision is not the entry's", ErrUnverified)
	}
	opened, err := checkOpened(r.Approval, e, shown)
	if err != nil {
		return nil, err
	}
	return &Decided{
		Decision: e.Decision, Policies: e.Policies, PolicyErrors: nonNil(e.PolicyErrors), PolicySet: e.PolicySet,
		Receipt: Receipt{Index: r.Index, Entry: e, Raw: []byte(r.Entry), Replayed: replayed, Approval: opened},
	}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func apiError(status int, body []byte) *Error {
	var e struct {
		Error struct{ Code, Message, Term string } `json:"error"`
	}
	json.Unmarshal(body, &e)
	return &Error{Status: status, Code: e.Error.Code, Message: e.Error.Message, Term: e.Error.Term}
}

// checkReceipt verifies a receipt: the entry is strictly valid, signed by
// the ledger's key, at the index claimed, and records exactly d; an
// opened approval is checked as checkOpened says.
func (c *Client) checkReceipt(body []byte, d Decision, shown *commit.Digest, replayed bool) (*Receipt, error) {
	var r struct {
		Approval json.RawMessage `json:"approval"`
		Index    uint64          `json:"index"`
		Entry    json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: malformed receipt", ErrUnverified)
	}
	e, err := c.checkEntry(r.Entry, r.Index, Request{Principal: d.Principal, Action: d.Action, Params: d.Params, Tiers: d.Tiers, Attributes: d.Attributes})
	if err != nil {
		return nil, err
	}
	if e.Decision != d.Decision || !slices.Equal(e.Policies, entry.SortPolicies(d.Policies)) {
		return nil, fmt.Errorf("%w: the entry does not record the decision sent", ErrUnverified)
	}
	opened, err := checkOpened(r.Approval, e, shown)
	if err != nil {
		return nil, err
	}
	return &Receipt{Index: r.Index, Entry: e, Raw: []byte(r.Entry), Replayed: replayed, Approval: opened}, nil
}

// signedEntry parses a receipt's entry strictly and checks that it is
// signed by the ledger's key and at the index claimed.
func (c *Client) signedEntry(raw json.RawMessage, index uint64) (*entry.Entry, error) {
	e, err := entry.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	if e.Index != index {
		return nil, fmt.Errorf("%w: the receipt says index %d, its entry %d", ErrUnverified, index, e.Index)
	}
	if err := c.verifyEntry(e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return e, nil
}

// checkEntry parses a receipt's entry strictly and checks that it is
// signed by the ledger's key, at the index claimed, and records exactly
// the request d (the decision is the caller's to check).
func (c *Client) checkEntry(raw json.RawMessage, index uint64, d Request) (*entry.Entry, error) {
	e, err := c.signedEntry(raw, index)
	if err != nil {
		return nil, err
	}
	attrs, err := commit.Canonicalize(d.Attributes)
	if err != nil {
		return nil, err
	}
	same := e.Principal == d.Principal && e.Action == d.Action &&
		e.Params.Equal(d.Params) && e.Tiers.Equal(d.Tiers) && bytes.Equal(e.Attributes, attrs)
	if !same {
		return nil, fmt.Errorf("%w: the entry does not record the request sent", ErrUnverified)
	}
	return e, nil
}

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.baseURL+path, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" { // reads are public unless the server protects them
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apiError(resp.StatusCode, b)
	}
	return b, nil
}

// Checkpoint fetches the latest checkpoint and opens it with the ledger's
// key.
func (c *Client) Checkpoint(ctx context.Context) (*log.Checkpoint, []byte, error) {
	signed, err := c.get(ctx, "/v1/checkpoint")
	if err != nil {
		return nil, nil, err
	}
	cp, err := c.key.Checkpoint(signed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return cp, signed, nil
}

// Entry fetches the signed entry at index and verifies it: strictly
// encoded, signed by the ledger's key, and at that index. It returns the
// entry and its signed bytes. (An entry alone is not proved to be in the
// log's tree: TlogProof fetches it with that proof.)
func (c *Client) Entry(ctx context.Context, index uint64) (*entry.Entry, []byte, error) {
	b, err := c.get(ctx, fmt.Sprintf("/v1/entries/%d", index))
	if err != nil {
		return nil, nil, err
	}
	e, err := entry.Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	if e.Index != index {
		return nil, nil, fmt.Errorf("%w: asked for entry %d, got entry %d", ErrUnverified, index, e.Index)
	}
	if err := c.verifyEntry(e); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return e, b, nil
}

// TlogProof fetches the C2SP tlog-proof@v1 file of the entry at index,
// against the latest checkpoint, and verifies it as ledger-verify proof
// does: the checkpoint's signature, the entry's encoding and signature,
// its index, and its inclusion in the checkpoint's tree. It returns the
// file's bytes, the entry and the checkpoint.
func (c *Client) TlogProof(ctx context.Context, index uint64) ([]byte, *entry.Entry, *log.Checkpoint, error) {
	b, err := c.get(ctx, fmt.Sprintf("/v1/proofs/%d", index))
	if err != nil {
		return nil, nil, nil, err
	}
	e, cp, err := verify.VerifyTlogProof(b, c.key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	if e.Index != index {
		return nil, nil, nil, fmt.Errorf("%w: asked for the proof of entry %d, got entry %d", ErrUnverified, index, e.Index)
	}
	if err := c.runs.add(e.Index, e.KeyID); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return b, e, cp, nil
}

type proofBody struct {
	TreeSize uint64   `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

// VerifyInclusion fetches the inclusion proof of a receipt's entry in the
// tree of a verified checkpoint and checks it.
func (c *Client) VerifyInclusion(ctx context.Context, r *Receipt, cp *log.Checkpoint) error {
	b, err := c.get(ctx, fmt.Sprintf("/v1/inclusion?index=%d&tree_size=%d", r.Index, cp.Size))
	if err != nil {
		return err
	}
	var p proofBody
	if err := json.Unmarshal(b, &p); err != nil || p.TreeSize != cp.Size {
		return fmt.Errorf("%w: malformed inclusion proof", ErrUnverified)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.Index, cp.Size, rfc6962.DefaultHasher.HashLeaf(r.Raw), p.Hashes, cp.Hash); err != nil {
		return fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return nil
}

// VerifyConsistency fetches and checks the proof that newer's tree extends
// older's.
func (c *Client) VerifyConsistency(ctx context.Context, older, newer *log.Checkpoint) error {
	b, err := c.get(ctx, fmt.Sprintf("/v1/consistency?size1=%d&tree_size=%d", older.Size, newer.Size))
	if err != nil {
		return err
	}
	var p proofBody
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("%w: malformed consistency proof", ErrUnverified)
	}
	return verify.Consistency(older, newer, p.Hashes)
}
