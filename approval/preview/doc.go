// Package preview turns the preview document a mediator sends with an
// approval request (the JSON the workload is willing to show an approver)
// into what the approver is shown: the document is first redacted, then
// bounded, in that order, and the result is digested. ledgerd keeps the
// preview outside the log and records only its digest. docs/approvals.md
// ("Previews") is the full specification; this is its summary. The package
// is pure: no I/O, no clock, no context.
//
// # Input
//
// One JSON value in the strict domain of package commit (objects, arrays,
// strings in NFC and without a code point whose normalization depends on
// the Unicode version, integers within ±(2^53−1), booleans, null; no
// duplicate names), at most MaxInputBytes (1 MiB) and 64 levels deep.
// Anything else is refused with an *InputError naming the kind and the
// RFC 6901 pointer, never a value; a pointer segment with a credential
// shape is written "[REDACTED]". Redaction and markers add only ASCII, so
// the NFC judgements below are over text every Unicode version from 14.0
// to 17.0 judges alike.
//
// # Redaction, first, over the whole document
//
// By name: a member whose name is sensitive has its value, whatever its
// type, replaced by the string "[REDACTED]". A name is sensitive if
//
//   - folded (lower case; '_', '-', '.' and spaces removed), it contains
//     password, passwd, passphrase, passcode, secret, apikey, accesskey,
//     privatekey, privkey, signingkey, encryptionkey, credential,
//     authorization, cookie, bearer, sessionid, sessionkey, csrf or xsrf;
//   - or one of its words (split at non-letters and at lower-to-upper case
//     changes) is token, auth, session, otp, ssn, pwd, pass, jwt, cvv or
//     cvc ("access_token", "authToken"; not "max_tokens", "author",
//     "oauth");
//   - or, folded, it is exactly pin or pincode.
//
// By shape: in every string, and every member name, these matches are
// replaced by "[REDACTED]" (only the match; the rest of the string stays):
//
//   - a PEM private key block, "-----BEGIN … PRIVATE KEY-----" to its END
//     line, or to the end of the string if it has none;
//   - the password of a URL's userinfo, scheme://user:PASSWORD@ (the
//     scheme, user and host stay);
//   - the credential after "Bearer " (any case) when it has at least 16
//     token68 characters, and after "Basic " when it is base64 of text
//     holding ':' (the scheme word stays);
//   - a JWT: eyJ….eyJ….[sig], base64url segments;
//   - API keys by prefix: AKIA/ASIA + 16, sk_/rk_/pk_ live_/test_ + 16 or
//     more, ghp_/gho_/ghu_/ghs_/ghr_ + 36 or more, github_pat_, xox[abposr]-,
//     sk-, AIza + 35, glpat-, npm_ + 36;
//   - any maximal run of at least 32 characters of [A-Za-z0-9+=_-] that
//     holds an upper-case letter, a lower-case letter and a digit. '/' and
//     '.' end a run, so URL paths and host names are not taken for tokens;
//     a lower-case hex digest (a parameter digest, an entry hash) or a UUID
//     has no upper-case letter and stays visible.
//
// The rules run in that order, repeatedly until the string no longer
// changes (at most 8 rounds, then the whole string is replaced). A member
// name with a shape is replaced by "[REDACTED]", "[REDACTED 2]", … in
// canonical order, skipping names the object already has. Shape detection
// is best effort: an unknown credential format passes. Preview.Redacted
// counts the replacements.
//
// # Bounding, second
//
// The redacted document is written as RFC 8785 JSON under the limits of
// the first pass whose output is at most Ceiling (8,192) bytes:
//
//	pass  characters per string  items per array  fields per object  depth
//	1     1000                   50               100                8
//	2     256                    20               40                 6
//	3     64                     5                15                 4
//	4     16                     2                6                  3
//
// Truncation is marked. A string longer than the limit keeps its first
// code points and ends with "…[+N chars]" (N code points left out; a cut
// that would fall inside a "[REDACTED]" marker falls just before it, so a
// marker is kept whole or not at all; one fewer is kept while the prefix
// and marker would not be NFC), and is then
// redacted again, since a fragment can take a shape the whole did not
// have. An array longer than the limit keeps its first items and ends with
// the string "[+N items]". An object with more members keeps the first in
// canonical order and gains the member "…" (U+2026; "……" if "…" is a kept
// name, and so on) with the value "[+N fields]". An array or object nested
// deeper than the limit (the outermost container is at depth 1) becomes the
// string "[depth limit]". Member names are never shortened. If no pass fits,
// the preview is {"bytes":N,"…":"[too large]"}, N the length of the
// redacted document's canonical form, and Pass is FallbackPass (5).
// Markers are written by the workload's own hand just as easily: the
// authoritative record of loss is Preview.Truncated.
//
// # Digest
//
//	digest = SHA-256("ledger/v1/preview\n" || preview)
//
// written as commit.Digest ("sha256:" and 64 hex digits). The document
//
//	{"to": "alice@example.com", "amount_minor": 1250, "password": "hunter2"}
//
// gives the preview
//
//	{"amount_minor":1250,"password":"[REDACTED]","to":"alice@example.com"}
//
// and the digest
//
//	sha256:b72aba324b0bdf5c752fa3dd5edf0a729ecef2cc48413ee47bd3f61e13c28a81
//
// # Why not a library
//
// Nothing in the module's pinned dependencies redacts credentials in JSON
// by member name and value shape, nor bounds a JSON value into a marked,
// canonical preview; the redaction rules are ours to specify and test.
//
// # Changes
//
// The digest covers the preview's bytes, so an approver's tool recomputes
// it without knowing the rules. The rules, markers and passes may be
// refined (a new credential shape, say) and are then listed here with the
// date; a change to what is digested (the separator, the canonical form)
// takes a new domain separator ("ledger/v2/preview\n").
//
//   - 2026-12-01: a cut never falls inside a "[REDACTED]" marker
//     (before, a string could end "[REDA…[+N chars]").
package preview
