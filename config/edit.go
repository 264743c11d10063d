package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The member editor that the changes in change.go share. A change splits
// the file's object into its members as written, replaces the values it
// changes, and joins them again: every other member keeps its place and
// its value, and the whole text is indented by two spaces (indent).
// Members are found as encoding/json matches names, ignoring case, so a
// name that would match twice is refused rather than guessed.

// member is one member of a JSON object, its value as written.
type member struct {
	key   string
	value json.RawMessage
}

// members splits a JSON object into its members, in order.
func members(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

// findMember finds the member key in ms, as encoding/json matches names
// (ignoring case), and refuses a name that appears twice.
func findMember(ms []member, key string) (int, error) {
	at, err := findOptional(ms, key)
	if err == nil && at < 0 {
		return 0, fmt.Errorf("no member %s", key)
	}
	return at, err
}

// findOptional is findMember for a member that may be absent: -1 then.
func findOptional(ms []member, key string) (int, error) {
	at := -1
	for i, m := range ms {
		if strings.EqualFold(m.key, key) {
			if at >= 0 {
				return 0, fmt.Errorf("%s appears twice: edit the config by hand", key)
			}
			at = i
		}
	}
	return at, nil
}

// joinObject writes members as a compact JSON object.
func joinObject(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quote(m.key))
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

// quote is s as a JSON string, without escaping <, > and &.
func quote(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// indent is the text of a config file whose object has the members top:
// indented by two spaces, with a final newline.
func indent(top []member) ([]byte, error) {
	var text bytes.Buffer
	if err := json.Indent(&text, joinObject(top), "", "  "); err != nil {
		return nil, err
	}
	text.WriteByte('\n')
	return text.Bytes(), nil
}

// parseChanged parses the changed text of the config file at path: what
// is written must be a valid config.
func parseChanged(text []byte, path string) (*Config, error) {
	c, err := Parse(text, path)
	if err != nil {
		return nil, fmt.Errorf("the changed config would be refused: %w", err)
	}
	return c, nil
}
