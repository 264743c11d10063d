package approver

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"golang.org/x/text/unicode/norm"
)

// MaxNameLen is the longest approver name, in bytes.
const MaxNameLen = 128

// AllActions in Actions lets an approver approve every action.
const AllActions = "*"

// Approver is a person who may approve or deny requests: one element of
// ledgerd's config member "approvers".
type Approver struct {
	// Name is the approver's name, recorded as the approver of each
	// verdict: an identifier (docs/entry.md §1.1), in NFC, 1 to 128
	// bytes, unique among the approvers. Required.
	Name string `json:"name"`
	// PasswordHash is the argon2id hash of the approver's password, in
	// the PHC string format ($argon2id$v=19$m=65536,t=3,p=2$SALT$HASH,
	// HashPassword). Required. The password itself is never stored.
	PasswordHash string `json:"password_argon2id"`
	// Actions are the actions the approver may approve, identifiers; "*"
	// is every action. Required, at least one.
	Actions []string `json:"actions"`
	// Principals, if not empty, are the only principals whose requests
	// the approver may approve, identifiers other than "*". Optional;
	// default empty: any principal but the approver's own name.
	Principals []string `json:"principals,omitempty"`
}

// Check refuses an approver whose name, hash, actions or principals do
// not follow the rules of Approver's fields. Its errors name the field at
// fault, never the hash; a *HashError for the hash.
func (a *Approver) Check() error {
	if err := checkName(a.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if _, _, _, err := decodeHash(a.PasswordHash); err != nil {
		return err
	}
	if len(a.Actions) == 0 {
		return errors.New("actions: none: list the actions the approver may approve, or \"*\" for all")
	}
	for i, s := range a.Actions {
		if s != AllActions {
			if err := checkName(s); err != nil {
				return fmt.Errorf("actions[%d]: %w", i, err)
			}
		}
	}
	for i, s := range a.Principals {
		if s == "*" {
			// "*" would match only a principal named "*": say so
			// rather than have it read as "any principal".
			return fmt.Errorf("principals[%d]: \"*\" is not a wildcard: leave principals empty for any principal", i)
		}
		if err := checkName(s); err != nil {
			return fmt.Errorf("principals[%d]: %w", i, err)
		}
	}
	return nil
}

// checkName refuses a string that is not an identifier of 1 to 128 bytes
// in NFC, without a code point of docs/commitment.md §2.4 (the form of
// every string of an entry), naming the fault but never the string.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxNameLen:
		return fmt.Errorf("%d bytes, over %d", len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case !commit.NormalizationStable(s):
		// Checked before NFC, as the strict domain does: entries could not hold it.
		return errors.New("holds a code point whose normalization depends on the Unicode version (docs/commitment.md §2.4)")
	case !norm.NFC.IsNormalString(s):
		return errors.New("not in NFC")
	}
	return entry.CheckIdentifier(s)
}

// ByName checks each approver (Check) and that no two share a name, and
// returns a function that finds an approver by name, for Sessions.Login.
// The approvers are copied: later changes to the slice are not seen.
func ByName(approvers []Approver) (func(name string) (*Approver, bool), error) {
	m := make(map[string]*Approver, len(approvers))
	for i := range approvers {
		a := approvers[i]
		a.Actions = slices.Clone(a.Actions)
		a.Principals = slices.Clone(a.Principals)
		if err := a.Check(); err != nil {
			return nil, fmt.Errorf("approvers[%d]: %w", i, err)
		}
		if _, dup := m[a.Name]; dup {
			return nil, fmt.Errorf("approvers[%d]: name %q repeated", i, a.Name)
		}
		m[a.Name] = &a
	}
	return func(name string) (*Approver, bool) {
		a, ok := m[name]
		return a, ok
	}, nil
}

// Reasons a request is not an approver's to approve, wrapped by a
// *RefusalError.
var (
	ErrSelfApproval = errors.New("an approver never approves a request whose principal is themselves")
	ErrNotAction    = errors.New("the action is not one the approver may approve")
	ErrNotPrincipal = errors.New("the principal is not one whose requests the approver may approve")
)

// RefusalError says why an approver may not approve a request: Err is
// ErrSelfApproval, ErrNotAction or ErrNotPrincipal.
type RefusalError struct {
	Approver, Action, Principal string
	Err                         error
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("approver %q, action %q, principal %q: %v", e.Approver, e.Action, e.Principal, e.Err)
}

func (e *RefusalError) Unwrap() error { return e.Err }

// MayApprove returns nil if a may approve or deny a request of principal
// for action, and otherwise a *RefusalError: always when principal is a's
// own name (compared byte for byte, as identifiers are), whatever Actions
// and Principals say; when action is not in Actions and Actions has no
// "*"; when Principals is not empty and principal is not in it.
func (a *Approver) MayApprove(action, principal string) error {
	refuse := func(err error) error {
		return &RefusalError{Approver: a.Name, Action: action, Principal: principal, Err: err}
	}
	switch {
	case principal == a.Name:
		return refuse(ErrSelfApproval)
	case !slices.Contains(a.Actions, AllActions) && !slices.Contains(a.Actions, action):
		return refuse(ErrNotAction)
	case len(a.Principals) > 0 && !slices.Contains(a.Principals, principal):
		return refuse(ErrNotPrincipal)
	}
	return nil
}
