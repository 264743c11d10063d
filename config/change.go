package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
)

// The changes "ledgerd token", "ledgerd approver" and "ledgerd key
// rotate" make to a config file, and the text "ledgerd init" writes.
//
// A change takes the file's text and its path (for the messages, and
// for Parse, which joins the file's relative paths to its directory) and
// returns the changed text; it reads and writes no file. Only the members
// it names change: every other one keeps its place and its value, and
// the text is indented by two spaces (edit.go). The changed text is
// parsed and checked as Load would before it is returned, so a change
// that would make the config invalid is refused, with an error and no
// text. The caller replaces the file with the text, atomically, and only
// if the file still holds the text it was given.

// AddMediatorToken returns text, the config file at path, with a new
// mediator name known by tokenHash, the SHA-256 of its token in lower-case
// hex. The config must be valid, and have no mediator name.
func AddMediatorToken(text []byte, path, name, tokenHash string) ([]byte, error) {
	_, mediators, top, mi, err := editMediators(text, path, name, true)
	if err != nil {
		return nil, err
	}
	mediators = append(mediators, joinObject([]member{
		{"name", quote(name)}, {"token_sha256", quote(tokenHash)},
	}))
	top[mi].value = joinArray(mediators)
	return changedMediator(top, path, name, tokenHash)
}

// TokenRotation is what RotateMediatorToken did besides the new hash.
type TokenRotation struct {
	// Expires is when the old token stops being valid, with an overlap;
	// "" without.
	Expires string
	// Dropped is the expiry of a previous token that the rotation
	// dropped before it expired; "" if none was.
	Dropped string
}

// RotateMediatorToken returns text, the config file at path, with the
// mediator name known by tokenHash instead of its token. With overlap >
// 0 the old token stays valid beside the new one as its previous token,
// until now + overlap (whole seconds, UTC); any rotation replaces the
// previous token there was (previous_token_sha256 and
// previous_token_expires, added last among the mediator's members). The
// config must be valid, and have a mediator name.
func RotateMediatorToken(text []byte, path, name, tokenHash string, overlap time.Duration, now time.Time) ([]byte, TokenRotation, error) {
	var rot TokenRotation
	cfg, mediators, top, mi, err := editMediators(text, path, name, false)
	if err != nil {
		return nil, rot, err
	}
	at := mediatorIndex(cfg, name)
	m, err := members(mediators[at])
	if err != nil {
		return nil, rot, fmt.Errorf("%s: mediators[%d]: %w", path, at, err)
	}
	ti, err := findMember(m, "token_sha256")
	if err != nil {
		return nil, rot, fmt.Errorf("%s: mediators[%d]: %w", path, at, err)
	}
	m[ti].value = quote(tokenHash)
	was := cfg.Mediators[at]
	if was.PreviousTokenSHA256 != "" {
		if t, err := ParsePreviousExpires(was.PreviousTokenExpires); err == nil && now.Before(t) {
			rot.Dropped = was.PreviousTokenExpires
		}
	}
	// Drop the previous pair (as encoding/json matches names), then add
	// the new one at the end.
	m = slices.DeleteFunc(m, func(om member) bool {
		return strings.EqualFold(om.key, "previous_token_sha256") || strings.EqualFold(om.key, "previous_token_expires")
	})
	if overlap > 0 {
		rot.Expires = now.Add(overlap).UTC().Truncate(time.Second).Format(time.RFC3339)
		m = append(m, member{"previous_token_sha256", quote(was.TokenSHA256)},
			member{"previous_token_expires", quote(rot.Expires)})
	}
	mediators[at] = joinObject(m)
	top[mi].value = joinArray(mediators)
	changed, err := changedMediator(top, path, name, tokenHash)
	if err != nil {
		return nil, rot, err
	}
	return changed, rot, nil
}

// editMediators parses text, the valid config at path, which must have
// mediator name (or not, to add it), and splits it into its members top
// and the mediators member's values, top[mi].
func editMediators(text []byte, path, name string, add bool) (cfg *Config, mediators []json.RawMessage, top []member, mi int, err error) {
	cfg, err = Parse(text, path)
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("%w (fix the config first)", err)
	}
	switch exists := mediatorIndex(cfg, name) >= 0; {
	case add && exists:
		return nil, nil, nil, 0, fmt.Errorf("mediator %q exists in %s: \"ledgerd token rotate\" gives it a new token", name, path)
	case !add && !exists:
		return nil, nil, nil, 0, fmt.Errorf("no mediator %q in %s: \"ledgerd token add\" adds one", name, path)
	}
	if top, err = members(text); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if mi, err = findMember(top, "mediators"); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(top[mi].value, &mediators); err != nil || len(mediators) != len(cfg.Mediators) {
		return nil, nil, nil, 0, fmt.Errorf("%s: mediators is not an array of objects", path)
	}
	return cfg, mediators, top, mi, nil
}

// changedMediator is the text of the config with the members top, which
// must be valid and know mediator name by tokenHash.
func changedMediator(top []member, path, name, tokenHash string) ([]byte, error) {
	text, err := indent(top)
	if err != nil {
		return nil, err
	}
	changed, err := parseChanged(text, path)
	if err != nil {
		return nil, err
	}
	if at := mediatorIndex(changed, name); at < 0 || changed.Mediators[at].TokenSHA256 != tokenHash {
		return nil, errors.New("the changed config does not hold the new token") // a bug
	}
	return text, nil
}

// mediatorIndex is the index of mediator name in c.Mediators, -1 if it
// has none.
func mediatorIndex(c *Config, name string) int {
	return slices.IndexFunc(c.Mediators, func(m Mediator) bool { return m.Name == name })
}

// AddApprover returns text, the config file at path, with approver a
// added to approvals.approvers, last; the approvals member is made, last,
// if there is none (or it is null), and so is its approvers member. Only
// approvals.approvers changes. The config must be valid, and have no
// approver a.Name; a must be valid (a.Check).
func AddApprover(text []byte, path string, a approver.Approver) ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return editApprovers(text, path, a.Name, true, func(list []json.RawMessage) ([]json.RawMessage, error) {
		return append(list, b), nil
	})
}

// RemoveApprover returns text, the config file at path, without the
// approver name in approvals.approvers. Only approvals.approvers changes.
// The config must be valid, and have an approver name.
func RemoveApprover(text []byte, path, name string) ([]byte, error) {
	return editApprovers(text, path, name, false, func(list []json.RawMessage) ([]json.RawMessage, error) {
		at := -1
		for i, raw := range list {
			var x approver.Approver
			if json.Unmarshal(raw, &x) == nil && x.Name == name {
				at = i
			}
		}
		if at < 0 {
			return nil, fmt.Errorf("no approver %q in %s", name, path)
		}
		return slices.Delete(list, at, at+1), nil
	})
}

// editApprovers changes approvals.approvers of text, the config at path,
// by change, after which it must hold approver name (add) or not.
func editApprovers(text []byte, path, name string, add bool, change func([]json.RawMessage) ([]json.RawMessage, error)) ([]byte, error) {
	cfg, err := Parse(text, path)
	if err != nil {
		return nil, fmt.Errorf("%w (fix the config first)", err)
	}
	if add && hasApprover(cfg, name) {
		return nil, fmt.Errorf("approver %q exists in %s: \"ledgerd approver remove\" it first to change it", name, path)
	}
	top, err := members(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ai, err := findOptional(top, "approvals")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if ai < 0 {
		top = append(top, member{"approvals", json.RawMessage(`{}`)})
		ai = len(top) - 1
	} else if bytes.Equal(bytes.TrimSpace(top[ai].value), []byte("null")) {
		top[ai].value = json.RawMessage(`{}`)
	}
	appr, err := members(top[ai].value)
	if err != nil {
		return nil, fmt.Errorf("%s: approvals: %w", path, err)
	}
	li, err := findOptional(appr, "approvers")
	if err != nil {
		return nil, fmt.Errorf("%s: approvals: %w", path, err)
	}
	if li < 0 {
		appr = append(appr, member{"approvers", json.RawMessage(`[]`)})
		li = len(appr) - 1
	}
	var list []json.RawMessage
	if err := json.Unmarshal(appr[li].value, &list); err != nil && !bytes.Equal(bytes.TrimSpace(appr[li].value), []byte("null")) {
		return nil, fmt.Errorf("%s: approvals.approvers is not an array", path)
	}
	if list, err = change(list); err != nil {
		return nil, err
	}
	appr[li].value = joinArray(list)
	top[ai].value = joinObject(appr)
	changed, err := indent(top)
	if err != nil {
		return nil, err
	}
	c, err := parseChanged(changed, path)
	if err != nil {
		return nil, err
	}
	if hasApprover(c, name) != add {
		return nil, errors.New("the changed config does not hold the change") // a bug
	}
	return changed, nil
}

// hasApprover reports whether c has an approver name.
func hasApprover(c *Config, name string) bool {
	return c.Approvals != nil && slices.ContainsFunc(c.Approvals.Approvers, func(x approver.Approver) bool { return x.Name == name })
}

// RotateKey returns text, the config file at path, signing with the key
// file newKey (an absolute path, written relative to the config's
// directory when it lies beneath it) and listing oldVKey, the verifier
// key of the key it replaces, in previous_keys (made after key_file if
// there is none), unless it is listed. Only key_file and previous_keys
// change. A config already changed so is returned as it is, and so it is
// neither parsed nor checked: the caller writes nothing then.
func RotateKey(text []byte, path, newKey, oldVKey string) ([]byte, error) {
	top, err := members(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	keyFile := relativeTo(path, newKey)
	ki, err := findMember(top, "key_file")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	top[ki].value = quote(keyFile)
	var previous []string
	pi, err := findOptional(top, "previous_keys")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pi >= 0 {
		if err := json.Unmarshal(top[pi].value, &previous); err != nil {
			return nil, fmt.Errorf("%s: previous_keys: %w", path, err)
		}
	} else {
		top = slices.Insert(top, ki+1, member{key: "previous_keys"})
		pi = ki + 1
	}
	if !slices.Contains(previous, oldVKey) {
		previous = append(previous, oldVKey)
	}
	values := make([]json.RawMessage, len(previous))
	for i, v := range previous {
		values[i] = quote(v)
	}
	top[pi].value = joinArray(values)
	changed, err := indent(top)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(changed, text) {
		return text, nil
	}
	if _, err := parseChanged(changed, path); err != nil {
		return nil, err
	}
	return changed, nil
}

// NewFile is the text of a new config file, as "ledgerd init" and a
// first start write it: only what the operator chose and what Load
// requires. listen only if it is not "" (the operator gave it), the key
// file and the store directory (relative to the file's directory) and
// one mediator m, its name and token hash; every other member is absent,
// so that it has its default, and the file pins nothing nobody chose.
// Members are in Config's order, indented by two spaces.
func NewFile(listen, keyFile, storeDir string, m Mediator) []byte {
	var top []member
	if listen != "" {
		top = append(top, member{"listen", quote(listen)})
	}
	top = append(top,
		member{"key_file", quote(keyFile)},
		member{"store_dir", quote(storeDir)},
		member{"mediators", joinArray([]json.RawMessage{joinObject([]member{
			{"name", quote(m.Name)}, {"token_sha256", quote(m.TokenSHA256)},
		})})},
	)
	text, _ := indent(top) // valid JSON: every value is quoted or joined
	return text
}
