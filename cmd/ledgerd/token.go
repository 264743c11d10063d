package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/decisionledger/ledger/config"
)

// token is "ledgerd token add NAME" and "ledgerd token rotate NAME".
func token(args []string, stdout, stderr io.Writer) int {
	op, code, ok := subcommand(args, "token", []string{"add", "rotate"}, stdout, stderr)
	if !ok {
		return code
	}
	fset := flag.NewFlagSet("token "+op, flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	var overlap time.Duration
	if op == "rotate" {
		fset.DurationVar(&overlap, "overlap", 0, "how long the old token stays valid beside the new one")
	}
	operands, code, ok := parseArgs(fset, args[1:], 1, stdout, stderr)
	if !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "token "+op, "%v", err)
	}
	if overlap < 0 {
		return usageError(stderr, "token "+op, "--overlap %v is negative", overlap)
	}
	name := operands[0]
	if err := config.CheckMediatorName(name); err != nil {
		return usageError(stderr, "token "+op, "mediator %v", err)
	}
	path, err := df.existing()
	if err != nil {
		return fail(stderr, "token %s: %v", op, err)
	}
	ch, err := changeToken(path, op, name, overlap, time.Now())
	if err != nil {
		return fail(stderr, "token %s: %v", op, err)
	}
	fmt.Fprintln(stdout, ch.token)
	if op == "add" {
		fmt.Fprintf(stderr, "ledgerd: added mediator %q to %s, with the token printed on stdout: it is shown once, and only its SHA-256 is stored\n", name, path)
	} else {
		fmt.Fprintf(stderr, "ledgerd: new token for mediator %q in %s, printed on stdout: it is shown once, and only its SHA-256 is stored\n", name, path)
	}
	if ch.dropped != "" {
		fmt.Fprintf(stderr, "ledgerd: the previous token of mediator %q, valid until %s, is dropped: refused from the reload on\n", name, ch.dropped)
	}
	if ch.expires != "" {
		fmt.Fprintf(stderr, "ledgerd: the old token stays valid beside the new one until %s (previous_token_expires)\n", ch.expires)
	}
	fmt.Fprint(stderr, reloadHint)
	if op == "rotate" {
		fmt.Fprintf(stderr, "ledgerd: until then a running ledgerd takes the old token, not the new one\n")
	}
	return 0
}

// tokenChange is what changeToken did.
type tokenChange struct {
	// token is the new token.
	token string
	// expires is when the old token stops being valid, with --overlap;
	// "" without.
	expires string
	// dropped is the expiry of a previous token that the rotation
	// dropped before it expired; "" if none was.
	dropped string
}

// changeToken adds mediator name to the config at path ("add"), or gives
// it a new token ("rotate"). A rotation with overlap > 0 keeps the old
// token as the previous one, valid until now + overlap (whole seconds,
// UTC); any rotation replaces the previous token there was. The config
// must be valid before and after. Only the mediators member changes: the
// others keep their order and values, and the file is rewritten indented
// by two spaces, atomically (writeConfig), mode 0600, with its owner kept.
func changeToken(path, op, name string, overlap time.Duration, now time.Time) (tokenChange, error) {
	var ch tokenChange
	old, err := os.ReadFile(path)
	if err != nil {
		return ch, err
	}
	cfg, err := config.Parse(old, path)
	if err != nil {
		return ch, fmt.Errorf("%w (fix the config first)", err)
	}
	at := -1
	for i, m := range cfg.Mediators {
		if m.Name == name {
			at = i
		}
	}
	switch {
	case op == "add" && at >= 0:
		return ch, fmt.Errorf("mediator %q exists in %s: \"ledgerd token rotate\" gives it a new token", name, path)
	case op == "rotate" && at < 0:
		return ch, fmt.Errorf("no mediator %q in %s: \"ledgerd token add\" adds one", name, path)
	}
	tok, hash := newToken()
	top, err := objectMembers(old)
	if err != nil {
		return ch, fmt.Errorf("%s: %w", path, err)
	}
	mi, err := findConfigMember(top, "mediators")
	if err != nil {
		return ch, fmt.Errorf("%s: %w", path, err)
	}
	var mediators []json.RawMessage
	if err := json.Unmarshal(top[mi].value, &mediators); err != nil || len(mediators) != len(cfg.Mediators) {
		return ch, fmt.Errorf("%s: mediators is not an array of objects", path)
	}
	if op == "add" {
		mediators = append(mediators, joinObject([]objectMember{
			{"name", quoteJSON(name)}, {"token_sha256", quoteJSON(hash)},
		}))
	} else {
		m, err := objectMembers(mediators[at])
		if err != nil {
			return ch, fmt.Errorf("%s: mediators[%d]: %w", path, at, err)
		}
		ti, err := findConfigMember(m, "token_sha256")
		if err != nil {
			return ch, fmt.Errorf("%s: mediators[%d]: %w", path, at, err)
		}
		m[ti].value = quoteJSON(hash)
		was := cfg.Mediators[at]
		if was.PreviousTokenSHA256 != "" {
			if t, err := config.ParsePreviousExpires(was.PreviousTokenExpires); err == nil && now.Before(t) {
				ch.dropped = was.PreviousTokenExpires
			}
		}
		// Drop the previous pair (as encoding/json matches names), then
		// add the new one at the end.
		m = slices.DeleteFunc(m, func(om objectMember) bool {
			return strings.EqualFold(om.key, "previous_token_sha256") || strings.EqualFold(om.key, "previous_token_expires")
		})
		if overlap > 0 {
			ch.expires = now.Add(overlap).UTC().Truncate(time.Second).Format(time.RFC3339)
			m = append(m, objectMember{"previous_token_sha256", quoteJSON(was.TokenSHA256)},
				objectMember{"previous_token_expires", quoteJSON(ch.expires)})
		}
		mediators[at] = joinObject(m)
	}
	top[mi].value = joinArray(mediators)
	var text bytes.Buffer
	if err := json.Indent(&text, joinObject(top), "", "  "); err != nil {
		return ch, err
	}
	text.WriteByte('\n')
	// What is written must be a valid config with the change.
	changed, err := config.Parse(text.Bytes(), path)
	if err != nil {
		return ch, fmt.Errorf("the changed config would be refused: %w", err)
	}
	if got, _ := changed.MediatorTokens().Authenticate(tok, now); got != name {
		return ch, errors.New("the changed config does not hold the new token") // a bug
	}
	if err := replaceConfig(path, old, text.Bytes()); err != nil {
		return ch, err
	}
	ch.token = tok
	return ch, nil
}

// replaceConfig replaces the config at path, whose text was old, by text:
// atomically, mode 0600, and with the owner of the file it replaces (when
// the owner differs from the user running ledgerd, which must then be
// root, a file of its own would leave ledgerd unable to read its config).
// It refuses if the file changed since old was read (another ledgerd
// token running at once).
func replaceConfig(path string, old, text []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return writeConfigWith(path, text, true, func(tmp string) error {
		if err := keepOwner(tmp, st); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, old) {
			return fmt.Errorf("%s changed while ledgerd token ran: nothing was written; run it again", path)
		}
		return nil
	})
}

// objectMember is one member of a JSON object, its value as written.
type objectMember struct {
	key   string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, in order.
func objectMembers(b []byte) ([]objectMember, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []objectMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, objectMember{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

// findConfigMember finds the member key in ms, as encoding/json matches names
// (ignoring case), and refuses a name that appears twice.
func findConfigMember(ms []objectMember, key string) (int, error) {
	at := -1
	for i, m := range ms {
		if strings.EqualFold(m.key, key) {
			if at >= 0 {
				return 0, fmt.Errorf("%s appears twice: edit the config by hand", key)
			}
			at = i
		}
	}
	if at < 0 {
		return 0, fmt.Errorf("no member %s", key)
	}
	return at, nil
}

// joinObject writes members as a compact JSON object.
func joinObject(ms []objectMember) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quoteJSON(m.key))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// joinArray writes values as a compact JSON array.
func joinArray(values []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// quoteJSON is s as a JSON string, without escaping <, > and &.
func quoteJSON(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
