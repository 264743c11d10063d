// Package commit computes the ledger's commitment to an action's raw
// parameters: a digest that any party, in any language, recomputes byte
// for byte from the same parameters. docs/commitment.md is the full
// specification; this is its summary.
//
// # Commitment
//
//	digest = SHA-256("ledger/v1/params\n" || JCS(params))
//	size   = len(JCS(params))
//
// params is a JSON object inside the strict domain, JCS is RFC 8785, and the
// digest is written "sha256:" and 64 lower-case hex digits (see Digest).
//
// # Strict domain
//
// Input is refused, never repaired, if it is not RFC 8259 JSON text; if a
// string or member name is not well-formed UTF-8, holds an unpaired or
// reversed surrogate escape, holds one of the 92 code points whose
// normalization depends on the Unicode version (assigned after Unicode
// 14.0, up to 17.0: docs/commitment.md §2.4, decided before NFC), or is not
// in Unicode NFC; if an object repeats a
// member name (also when spelled with escapes); if a number's exact decimal
// value is an integer beyond ±(2^53−1), or is not an integer and the Domain
// does not admit non-integers (or admits them but RFC 8785 would write a
// different decimal value); or if nesting or size exceed the Domain's
// bounds (64 levels and 1 MiB by default). Numbers are judged by their exact
// decimal value, so 100, 100.0 and 1e2 are one amount and share a digest.
//
// Every refusal is a *DomainError carrying its Kind (testable with
// errors.Is), the RFC 6901 JSON pointer of the offending value and its byte
// offset, and never the value itself. NormalizeNFC converts text to NFC for
// callers who choose to; nothing else converts anything.
//
// Domain.Object decodes a JSON object under the same rules for reading
// its members, so that a request carrying a commitment is held to the
// commitment's domain (ledgerd's append bodies are).
//
// # Example
//
// The parameters
//
//	{"payee": "Café Exemple SARL", "amount_minor": 1250000, "currency": "EUR",
//	 "memo": "Invoice 2026-1142\nPO-88213", "due_days": 3e1, "tags": ["supplier", "q4"]}
//
// have the canonical form (146 bytes)
//
//	{"amount_minor":1250000,"currency":"EUR","due_days":30,"memo":"Invoice 2026-1142\nPO-88213","payee":"Café Exemple SARL","tags":["supplier","q4"]}
//
// and the digest
//
//	sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8
//
// # Hiding commitment (version 2)
//
// Hide commits to each top-level field under its own secret 32-byte
// opening, so that the log reveals nothing a dictionary could test:
//
//	c_f    = SHA-256("ledger/v2/field\n" || opening_f || JCS(name_f) || JCS(value_f))
//	digest = SHA-256("ledger/v2/params\n" || JCS(name_1) || c_1 || JCS(name_2) || c_2 || ...)
//	size   = len(JCS(name_1) || c_1 || ...)
//
// written "v2:sha256:<hex>" (Commitment.DigestText; ParseParamsDigest reads
// either version). The openings and values form a Disclosure, which the
// workload keeps (never the ledger), opens any subset of fields (Only,
// Check), and whose deletion is erasure. Openings come from crypto/rand
// (RandomOpenings), from a secret and a call key (DerivedOpenings), or
// from an earlier call's Disclosure (an approved call, retried).
//
// # Changes
//
// Version 1 is unchanged. Version 2 adds the hiding commitment under its
// own separators ("ledger/v2/params\n", "ledger/v2/field\n"); the strict
// domain and the canonical form are those of version 1.
package commit
