// Package entry defines a ledger entry: one mediator decision, signed and
// hash-linked to the entry before it. docs/entry.md is the full
// specification; this is its summary.
//
// # Encoding
//
// An entry is a JSON object in RFC 8785 canonical form with exactly these
// members (in canonical order):
//
//	action        string   the tool action decided on, e.g. "send_email"
//	attributes    object   the minimized attributes (canonical JSON)
//	decision      string   "allow", "deny" or "needs_approval"
//	definition_digest      version 2 only: "sha256:<hex>", the action definition applied
//	index         integer  position in the log, from 0
//	key_id        string   "<key name>+<8 hex digits>", the note key's name and hash
//	mediator      string   the mediator, from its credential
//	origin        string   the log's origin (its checkpoints' first line)
//	params_digest string   "sha256:<hex>", the parameter commitment (package commit);
//	                       "v2:sha256:<hex>" for a hiding one (commit.Hide)
//	params_size   integer  length of the bytes the digest covers
//	policies      array    determining policy ids, sorted in byte order, no repeats
//	prev          string   "sha256:<hex>", the previous entry's hash; zeros at index 0
//	principal     string   on whose behalf the agent acted
//	sig           string   standard base64 of the Ed25519 signature
//	tiers_digest  string   "sha256:<hex>", the applied-tiers digest
//	time          string   UTC, exactly "YYYY-MM-DDTHH:MM:SS.ffffffZ"
//	version       integer  1, or 2 with definition_digest
//
// All strings are non-empty (policy ids included), NFC, at most 1024 bytes;
// the signed entry is at most 65,535 bytes (so that C2SP tlog-tiles entry
// bundles, with their uint16 length prefixes, can carry it) and its
// attributes at most 32 KiB.
//
// The string members are identifiers: they hold no control character
// (U+0000-U+001F, U+007F-U+009F), no format character of Unicode 15.0
// (bidirectional controls, zero-width characters, ...), and neither U+2028
// nor U+2029; docs/entry.md §1.1 lists the code points. Attribute values
// are data, not identifiers, and may hold them.
//
// # Hashes and signature
//
//	M          = "ledger/v1/entry\n" || JCS(entry without "sig")  (version 2: "ledger/v2/entry\n")
//	sig        = Ed25519(key, M)
//	entry hash = SHA-256(M)                     (the next entry's prev)
//	leaf       = JCS(entry with "sig")          (what is stored and exported)
//	leaf hash  = SHA-256(0x00 || leaf)          (RFC 6962 Merkle leaf)
//
// Because prev covers the previous entry without its signature, a ledger can
// build the chain in order cheaply and sign entries in parallel; the Merkle
// tree, over leaves, commits to the signatures too.
//
// # Decoding
//
// Parse accepts only bytes that are exactly the canonical encoding of a
// valid entry; anything else is ErrNotCanonical or a *FieldError naming the
// member. ParseMessage accepts the same and also returns the signed
// message M. Verify checks the signature against a trusted key.
//
// # Changes
//
// Version 2 added definition_digest under the separator "ledger/v2/entry\n";
// an entry without a definition is still written as version 1. Versions
// 3 (ledger decisions and policy-set publications), 4 (the approval
// lifecycle, approval.go) and 5 (the outcome of an allowed act, whose
// "decision" member is the index of the allow decision, outcome.go) each
// added kinds under their own separator, "ledger/vN/entry\n"
// (docs/entry.md §5). A reader refuses versions it does not know.
package entry
