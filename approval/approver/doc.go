// Package approver holds the people who approve requests — approvers,
// their passwords, their sign-in sessions — and the checks of the
// approver's page that ledgerd serves: CSRF tokens, same-origin requests,
// cookies, and the refusal of mediator tokens. docs/approvals.md
// (§Approvers) describes the same for operators.
//
// # Approvers are people, not mediators
//
// Approvers are configured apart from mediators, in ledgerd's config
// member "approvers", each as an Approver:
//
//	{
//	  "name": "alice",
//	  "password_argon2id": "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0c2FsdA$qie54+IvXCT/C6ByRYKGNAZGg0sxeR/8LT3gdIvqGyU",
//	  "actions": ["send_email", "refund"],
//	  "principals": ["agent:billing"]
//	}
//
// (the hash is of the password "correct horse battery staple" with the
// salt "saltsaltsaltsalt": a worked example, which libargon2, the
// reference implementation, gives too; a real salt is random.)
//
// name is an identifier (docs/entry.md §1.1) of 1 to 128 bytes in NFC,
// recorded as the approver of each verdict; actions are the actions the
// approver may approve ("*" for every one); principals, optional, the only
// principals whose requests they may approve (empty: any). An approver
// never approves a request whose principal is their own name, whatever
// actions and principals say (MayApprove, which compares byte for byte:
// give approvers the names they have as principals, or the rule cannot
// see them).
//
// An approver's credential is a password, stored only as its argon2id
// hash, that opens a session on the page. It is never a mediator's token:
// the page takes no Authorization header at all (RefuseBearer), so a
// mediator token can never approve, even beside a valid session cookie.
//
// # Passwords
//
// A password is valid UTF-8, at least 12 characters (Unicode code points)
// and at most 1,024 bytes; a longer one is refused before any work, as
// argon2 would hash megabytes. It is hashed in its NFKC form (NIST SP
// 800-63B §5.1.1.2), so the same password typed on two systems gives the
// same bytes; an ASCII password is its own NFKC form.
//
// HashPassword makes argon2id (RFC 9106, golang.org/x/crypto/argon2's
// IDKey) with a random 16-byte salt, a 32-byte key and the parameters
// m = 65536 KiB (64 MiB), t = 3 passes, p = 2 lanes — RFC 9106 §4's second
// recommended option with two lanes for a 2-core server; one computation
// takes about 0.13 s on a 2-core Xeon (BenchmarkVerifyPassword, median of
// 6 runs). The hash is written in the PHC string format:
//
//	$argon2id$v=19$m=65536,t=3,p=2$<salt>$<key>
//
// salt and key in standard base64 without padding. VerifyPassword parses
// the string strictly — exactly this form, decimal numbers without sign or
// leading zeros, base64 without padding, line breaks or stray bits — so an
// accepted string is the one HashPassword would write. It computes with
// the string's own parameters, within bounds: m from 8×p to 1,048,576 KiB
// (1 GiB), t from 1 to 10, p from 1 to 16, a salt of 8 to 64 bytes and a
// key of 16 to 64 bytes; a string outside them is a *HashError, which
// names the part at fault and never repeats salt, key or password. Keys
// are compared in constant time. New parameters will be written in the
// same format, and strings with the old ones still verify.
//
// # Costs
//
// With the documented parameters each computation holds 64 MiB. At most 2
// computations run at once in the process (HashPassword, VerifyPassword
// and Login's together); at most 32 more wait for their turn, and beyond
// them a sign-in is refused at once with ErrBusy (ledgerd: 503). A flood
// of sign-ins so holds at most 128 MiB and a bounded queue.
//
// # Sessions
//
// Sessions.Login checks a name and password and opens a session. An
// unknown name and a wrong password get the same error, ErrCredentials,
// after the same work: for an unknown name an argon2id computation with
// the documented parameters is made and its result thrown away, so the
// time of the answer does not tell either. A password out of bounds is
// refused for any name without a computation.
//
// A session is a token of 32 random bytes in base64url without padding (43
// characters), given to the browser in a cookie (SessionCookie) and kept
// only as its SHA-256: a copy of the process's memory holds no token that
// opens a session. Each session also has a CSRF token (32 random bytes,
// base64url), kept as it is, that the page puts in its forms. A session
// ends 30 minutes after its last use (idle timeout) or 12 hours after its
// sign-in (lifetime), at the instant of equality, or at sign-out
// (End); at most 1,024 sessions are held, and a sign-in beyond them
// ends the oldest (Options changes the three). EndApprover ends every
// session of one approver (ledgerd's reload, for an approver removed or
// whose password changed). A session also keeps the SHA-256 of its
// approver's password hash at sign-in: Resume, given the approvers in
// force, ends it when its approver is gone or has another hash. Sessions
// live in a SessionStore: by default in memory (NewMemoryStore), so that
// after a restart approvers sign in again; ledgerd on PostgreSQL keeps
// them in the database, keyed by the token's SHA-256 likewise, so that
// they hold on every instance. Throttling is always in the process's
// memory.
//
// # Throttling
//
// Five failed sign-ins of one name within 15 minutes refuse that name's
// sign-ins for 15 minutes; 100 failed sign-ins of any names within 15
// minutes refuse every sign-in for 15 minutes (against one password tried
// on many names). A refused sign-in is a *ThrottledError, without any
// computation, even with the right password. Unknown names are counted as
// known ones are, so a refusal does not tell whether a name is an
// approver's. A sign-in being checked holds a place among the failures
// until its answer, so that of simultaneous tries of a name no more than
// five are ever checked. A success forgets the name's failures. The price:
// whoever knows a name can keep its owner out by failing five times every
// 15 minutes, and keep every approver out with 100 failures: a
// *ThrottledError belongs in ledgerd's log, where an operator sees it.
//
// # The page's requests
//
// ledgerd requires, for every request of the page that changes state (a
// POST: sign-in, approve, deny, sign-out), both:
//
//   - CheckOrigin: the browser says the request comes from the same
//     origin (Sec-Fetch-Site: same-origin, or else an Origin header of the
//     same host); and
//   - CheckCSRF: the form's CSRF token equals the session's (the
//     synchronizer token pattern), compared in constant time.
//
// Either alone would stop a cross-site form in current browsers; both are
// required, so that a browser that sends neither header, or a flaw in one
// check, is not enough. The session cookie is HttpOnly, SameSite=Strict,
// Path=/ and, under TLS, Secure and named with the __Host- prefix
// (SessionCookie).
package approver
