package commit

import (
	"bytes"
	"encoding/json"
)

// MemberPosition returns the position, from 0 in the order sent, of the
// member named name in the object at path (member names from the top) in
// body, a JSON object, or -1 when there is none. Error messages name a
// member by its position rather than by a name that might carry a value;
// a canonical object keeps its members in sorted order, not the client's,
// so the position is read from the text as sent.
func MemberPosition(body []byte, path []string, name string) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return -1
	}
	for i := 0; dec.More(); i++ {
		t, err := dec.Token()
		if err != nil {
			return -1
		}
		switch {
		case len(path) == 0 && t == name:
			return i
		case len(path) > 0 && t == path[0]:
			var inner json.RawMessage
			if err := dec.Decode(&inner); err != nil {
				return -1
			}
			return MemberPosition(inner, path[1:], name)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
	}
	return -1
}
