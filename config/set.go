package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/decisionledger/ledger/internal/pgurl"
)

// The members "ledgerd config set", "unset", "get" and "show" read and
// change: Config's top-level scalar members (strings, durations written
// as strings, integers), by their JSON names, exactly as written in
// Config's tags. SetMember and UnsetMember are changes as those of
// change.go are: the text in, the changed text out, parsed and checked
// as Load would, every other member kept in its place with its value.
// Unlike those, they need no valid config to start from, only a JSON
// object, so that a member a config is refused for can be set right.
//
// The other members are lists and objects, each with its own command
// (mediators: "ledgerd token"; approvals: "ledgerd approver";
// previous_keys: "ledgerd key rotate") or edited by hand; key_file is
// read here but changed only by "ledgerd key rotate", which signs the
// rotation checkpoint that a new key needs.

// ScalarMembers are the names of Config's top-level scalar members, in
// Config's order.
func ScalarMembers() []string {
	var names []string
	for _, f := range topFields() {
		if k := f.typ.Kind(); k == reflect.String || k == reflect.Int || k == reflect.Int64 {
			names = append(names, f.name)
		}
	}
	return names
}

// topField is one of Config's fields: its JSON name and Go type.
type topField struct {
	name string
	typ  reflect.Type
}

// topFields are Config's fields, in order.
func topFields() []topField {
	var fs []topField
	for f := range reflect.TypeFor[Config]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fs = append(fs, topField{name, f.Type})
	}
	return fs
}

// IsIntegerMember reports whether scalar member name is an integer (a
// JSON number in the file); the others are strings.
func IsIntegerMember(name string) bool {
	t := fieldType(name)
	return t != nil && (t.Kind() == reflect.Int || t.Kind() == reflect.Int64)
}

// pathMembers are the scalar members that are paths, relative to the
// config file's directory.
var pathMembers = []string{"key_file", "store_dir", "catalog_dir", "policy_dir"}

// IsPathMember reports whether scalar member name is a path.
func IsPathMember(name string) bool { return slices.Contains(pathMembers, name) }

// otherCommands say what changes the members SetMember refuses.
var otherCommands = map[string]string{
	"key_file":             `"ledgerd key rotate" changes it, signing the rotation checkpoint a new key needs`,
	"previous_keys":        `"ledgerd key rotate" adds to it`,
	"mediators":            `"ledgerd token add" and "ledgerd token rotate" change it`,
	"approvals":            `"ledgerd approver add" and "ledgerd approver remove" change its approvers; edit its other members by hand`,
	"reader_tokens_sha256": "edit the file by hand",
	"tls":                  "edit the file by hand",
	"cluster":              "edit the file by hand",
	"witnesses":            "edit the file by hand",
}

// UnknownMemberError is a name that is no member of the config: Nearest
// is the top-level member closest to it in spelling, which the operator
// may have meant.
type UnknownMemberError struct {
	Name, Nearest string
}

func (e *UnknownMemberError) Error() string {
	return fmt.Sprintf("no member %q in the config: did you mean %q? (\"ledgerd config show\" lists them)", e.Name, e.Nearest)
}

// NotSettableError is a member of the config that "ledgerd config set"
// and "unset" leave alone: a list or an object, or key_file. Why says
// what changes it instead.
type NotSettableError struct {
	Name, Why string
}

func (e *NotSettableError) Error() string {
	return fmt.Sprintf("%s is not a member ledgerd config sets: %s", e.Name, e.Why)
}

// CheckScalarMember refuses a name that is not a scalar member, with
// an *UnknownMemberError or, for another member, a *NotSettableError.
func CheckScalarMember(name string) error {
	if slices.Contains(ScalarMembers(), name) {
		return nil
	}
	if why, ok := otherCommands[name]; ok {
		return &NotSettableError{name, why}
	}
	var all []string
	for _, f := range topFields() {
		all = append(all, f.name)
	}
	return &UnknownMemberError{name, nearest(name, all)}
}

// CheckSettableMember is CheckScalarMember for SetMember and
// UnsetMember, which refuse key_file too.
func CheckSettableMember(name string) error {
	if err := CheckScalarMember(name); err != nil {
		return err
	}
	if why, ok := otherCommands[name]; ok {
		return &NotSettableError{name, why}
	}
	return nil
}

// SetMember returns text, the config file at path, with scalar member
// name set to value: an integer member's value in decimal, as
// strconv.FormatInt writes it; any other's as a JSON string, a path
// member's written relative to the file's directory when it is an
// absolute path beneath it. A member the file lacks is added after the
// members that come before it in Config's order. The text must be a
// JSON object, and the changed text a valid config; text that already
// holds the value is returned as it is.
func SetMember(text []byte, path, name, value string) ([]byte, error) {
	if err := CheckSettableMember(name); err != nil {
		return nil, err
	}
	var raw []byte
	switch {
	case IsIntegerMember(name):
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != value {
			return nil, fmt.Errorf("%s: the value is not an integer in decimal (such as 262144)", name)
		}
		raw = []byte(value)
	case value == "":
		return nil, fmt.Errorf("%s: the value is empty: \"ledgerd config unset %s\" gives it its default", name, name)
	case !utf8.ValidString(value):
		return nil, fmt.Errorf("%s: the value is not UTF-8", name)
	case IsPathMember(name):
		raw = quote(relativeTo(path, value))
	default:
		raw = quote(value)
	}
	top, at, err := topMember(text, path, name)
	if err != nil {
		return nil, err
	}
	if at >= 0 {
		top[at].value = raw
	} else {
		top = slices.Insert(top, insertionPoint(top, name), member{name, raw})
	}
	return changedText(text, top, path)
}

// topMember splits text, the config file at path, into its top-level
// members and finds name among them (-1 if absent).
func topMember(text []byte, path, name string) ([]member, int, error) {
	top, err := members(text)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	at, err := findOptional(top, name)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return top, at, nil
}

// UnsetMember returns text, the config file at path, without scalar
// member name, which then has its default. The text must be a JSON
// object, and the changed text a valid config (a required member
// cannot go); text without the member is returned as it is.
func UnsetMember(text []byte, path, name string) ([]byte, error) {
	if err := CheckSettableMember(name); err != nil {
		return nil, err
	}
	top, at, err := topMember(text, path, name)
	if err != nil {
		return nil, err
	}
	if at < 0 {
		return text, nil
	}
	return changedText(text, slices.Delete(top, at, at+1), path)
}

// changedText is the text of the members top, checked, or text if it
// says the same in the same way.
func changedText(text []byte, top []member, path string) ([]byte, error) {
	changed, err := indent(top)
	if err != nil {
		return nil, err
	}
	if string(changed) == string(text) {
		return text, nil
	}
	if _, err := parseChanged(changed, path); err != nil {
		return nil, err
	}
	return changed, nil
}

// MemberText is scalar member name's value as the file's text writes
// it: a string's characters, an integer's digits; false if the text
// does not set it (or sets it to null). The store URL's password is
// redacted.
func MemberText(text []byte, name string) (string, bool, error) {
	if err := CheckScalarMember(name); err != nil {
		return "", false, err
	}
	top, err := members(text)
	if err != nil {
		return "", false, err
	}
	at, err := findOptional(top, name)
	if err != nil || at < 0 || string(top[at].value) == "null" {
		return "", false, err
	}
	v := string(top[at].value)
	if fieldType(name).Kind() == reflect.String {
		if v, err = strconv.Unquote(v); err != nil {
			return "", false, fmt.Errorf("%s is not a JSON string", name)
		}
	}
	if name == "store" {
		v = pgurl.Redact(v)
	}
	return v, true, nil
}

// OtherMembers are the members the text sets, not to null, that are
// not scalar members (mediators, approvals, ...), in the text's order.
func OtherMembers(text []byte) ([]string, error) {
	top, err := members(text)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range top {
		if string(m.value) != "null" && !slices.ContainsFunc(ScalarMembers(), func(s string) bool { return strings.EqualFold(s, m.key) }) {
			names = append(names, m.key)
		}
	}
	return names, nil
}

// Default is the value in force of scalar member name when the file does
// not set it, as the file would write it, for the config c (some
// defaults are derived: max_connections from the descriptor limit,
// max_connections_per_source from it and store); false when the
// default is no value, which means says.
func (c *Config) Default(name string) (value string, ok bool, means string) {
	switch name {
	case "listen":
		return DefaultListen, true, ""
	case "key_name":
		return "", false, "the name the note key carries"
	case "store":
		return "", false, "none: a badger store in store_dir"
	case "checkpoint_interval":
		return durationText(defaultCheckpointInterval), true, ""
	case "min_commit_interval":
		return "1ms", true, "" // the ledger's (ledger.Options.MinCommitInterval)
	case "max_body_bytes":
		return strconv.Itoa(defaultMaxBodyBytes), true, ""
	case "tiles_prefix":
		return "", false, "the root: /checkpoint, /tile/..."
	case "idle_timeout":
		return durationText(defaultIdleTimeout), true, ""
	case "body_timeout":
		return durationText(DefaultBodyTimeout), true, ""
	case "write_timeout":
		return durationText(DefaultWriteTimeout), true, ""
	case "max_connections", "max_connections_per_source":
		maxConns, perSource, err := c.ConnectionCaps()
		switch {
		case err != nil:
			return "", false, err.Error()
		case name == "max_connections":
			return strconv.Itoa(maxConns), true, ""
		case perSource >= maxConns:
			return "", false, "no cap"
		}
		return strconv.Itoa(perSource), true, ""
	case "catalog_dir":
		return "", false, "none: any action, version 1 entries"
	case "policy_dir":
		return "", false, "none: POST /v1/decide is refused"
	case "witnesses_needed":
		return strconv.Itoa(c.WitnessesNeededCount()), true, ""
	case "witness_interval":
		return durationText(defaultWitnessInterval), true, ""
	}
	return "", false, "none" // key_file, store_dir: required
}

// durationText is d as docs/config.md writes defaults: whole seconds
// as "60s", others as time.Duration writes them ("100ms").
func durationText(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// fieldType is the Go type of Config's member name.
func fieldType(name string) reflect.Type {
	for _, f := range topFields() {
		if f.name == name {
			return f.typ
		}
	}
	return nil
}

// insertionPoint is where member name goes among top: after the last of
// them that comes before it in Config's order.
func insertionPoint(top []member, name string) int {
	order := map[string]int{}
	for i, f := range topFields() {
		order[f.name] = i
	}
	at := 0
	for i, m := range top {
		if o, ok := order[strings.ToLower(m.key)]; ok && o < order[name] {
			at = i + 1
		}
	}
	return at
}

// relativeTo is p, written relative to the directory of the config file
// at path when p is an absolute path beneath it.
func relativeTo(path, p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if dir, err := filepath.Abs(filepath.Dir(path)); err == nil {
		if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel
		}
	}
	return p
}

// nearest is the name of names closest to s: the fewest single-letter
// insertions, deletions and substitutions (Levenshtein), the first of
// those as close.
func nearest(s string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
