package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/config"
)

// configCommand is "ledgerd config set NAME VALUE", "unset NAME", "get
// NAME" and "show": the config's top-level scalar members
// (config.ScalarMembers), read and changed by name (docs/config.md
// "Changing the config").
func configCommand(args []string, stdout, stderr io.Writer) int {
	op, code, ok := subcommand(args, "config", []string{"set", "unset", "get", "show"}, stdout, stderr)
	if !ok {
		return code
	}
	cmd := "config " + op
	fset := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	var asJSON bool
	if op == "show" {
		fset.BoolVar(&asJSON, "json", false, "")
	}
	n := map[string]int{"set": 2, "unset": 1, "get": 1, "show": 0}[op]
	operands, code, ok := parseArgs(fset, args[1:], n, stdout, stderr)
	if !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, cmd, "%v", err)
	}
	var name string
	if n > 0 {
		name = operands[0]
		check := config.CheckScalarMember
		if op == "set" || op == "unset" {
			check = config.CheckSettableMember
		}
		if err := check(name); err != nil {
			return usageError(stderr, cmd, "%v", err)
		}
	}
	path, err := df.existing()
	if err != nil {
		return fail(stderr, "%s: %v", cmd, err)
	}
	switch op {
	case "set", "unset":
		err = configChange(path, op, name, operands[1:], stderr)
	case "get":
		err = configGet(path, name, stdout, stderr)
	default:
		err = configShow(path, asJSON, stdout)
	}
	if err != nil {
		return fail(stderr, "%s: %v", cmd, err)
	}
	return 0
}

// configChange sets member name to values[0] (set) or unsets it, and
// says how a running ledgerd takes the change. The file is replaced
// atomically, keeping its owner and permission bits. A relative path is the
// operator's, from the working directory: it is made absolute first,
// and config.SetMember writes it relative to the file's directory if it
// lies beneath it.
func configChange(path, op, name string, values []string, stderr io.Writer) error {
	var old, text []byte
	err := editConfigMode(path, true, func(was []byte) (changed []byte, err error) {
		old = was
		if op == "unset" {
			text, err = config.UnsetMember(was, path, name)
			return text, err
		}
		value := values[0]
		if config.IsPathMember(name) && value != "" && !filepath.IsAbs(value) {
			if value, err = filepath.Abs(value); err != nil {
				return nil, err
			}
		}
		text, err = config.SetMember(was, path, name, value)
		return text, err
	})
	if err != nil {
		return fmt.Errorf("%w (%s unchanged)", err, path)
	}
	switch {
	case string(text) == string(old) && op == "set":
		fmt.Fprintf(stderr, "ledgerd: %s already has that value in %s: nothing written\n", name, path)
		return nil
	case string(text) == string(old):
		fmt.Fprintf(stderr, "ledgerd: %s is not set in %s: nothing written\n", name, path)
		return nil
	case op == "set":
		fmt.Fprintf(stderr, "ledgerd: set %s in %s\n", name, path)
	default:
		fmt.Fprintf(stderr, "ledgerd: unset %s in %s: it has its default\n", name, path)
	}
	fmt.Fprintf(stderr, "ledgerd: %s\n", changeEffect(path, name, old, text))
	return nil
}

// changeEffect says how a running ledgerd takes the change of member
// name from the file's text old to text, as its reload would judge it
// (config.RestartFields).
func changeEffect(path, name string, old, text []byte) string {
	was, err := config.Parse(old, path)
	if err != nil {
		return "the config was refused before this change: ledgerd takes it at its next start"
	}
	now, err := config.Parse(text, path)
	if err != nil {
		return "the changed config is refused" // SetMember checked it: a bug
	}
	if !defaultWrittenOut(old, was, text, now, name) && slices.Contains(config.RestartFields(was, now), name) {
		return "a running ledgerd takes it only at a restart (systemctl restart ledgerd): SIGHUP does not change " + name
	}
	return "the value in force is the same: a running ledgerd needs nothing"
}

// defaultWrittenOut reports whether the change of member name from old
// (the config was) to text (now) only wrote out its default, or removed
// it where it was written out: the value in force is the same. (Two
// values written differ as RestartFields says.)
func defaultWrittenOut(old []byte, was *config.Config, text []byte, now *config.Config, name string) bool {
	oldValue, oldSet, _ := config.MemberText(old, name)
	newValue, newSet, _ := config.MemberText(text, name)
	switch {
	case !oldSet && newSet:
		def, ok, _ := was.Default(name)
		return ok && newValue == def
	case oldSet && !newSet:
		def, ok, _ := now.Default(name)
		return ok && oldValue == def
	}
	return false
}

// configGet prints member name's value: the file's, as written (a path
// relative to the file's directory, the store URL's password redacted),
// or, when the file does not set it, its default, if it has a value.
func configGet(path, name string, stdout, stderr io.Writer) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	value, set, err := config.MemberText(text, name)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if set {
		fmt.Fprintln(stdout, value)
		return nil
	}
	cfg, err := config.Parse(text, path)
	if err != nil {
		return fmt.Errorf("%w (its default depends on the config: fix it first)", err)
	}
	value, ok, means := cfg.Default(name)
	if ok {
		fmt.Fprintln(stdout, value)
		fmt.Fprintf(stderr, "ledgerd: %s is not set in %s: that is its default\n", name, path)
	} else {
		fmt.Fprintf(stderr, "ledgerd: %s is not set in %s: its default is %s\n", name, path, means)
	}
	return nil
}

// shownMember is one member of "ledgerd config show --json".
type shownMember struct {
	// Value is the file's value, or the default's: a number for an
	// integer member, else a string; absent for a default that is no
	// value.
	Value json.RawMessage `json:"value,omitempty"`
	// Default is whether the file does not set the member.
	Default bool `json:"default"`
	// Means says what a default that is no value means.
	Means string `json:"means,omitempty"`
}

// configShow prints every scalar member, one a line: its name and the
// file's value, or its default marked as one; then the other members
// the file sets. With asJSON, one JSON object: "members", each scalar
// member by name, in the config's order, as a shownMember, and "also_set",
// the other members' names.
func configShow(path string, asJSON bool, stdout io.Writer) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cfg, err := config.Parse(text, path)
	if err != nil {
		return fmt.Errorf("%w (\"ledgerd config get NAME\" reads a member, \"ledgerd config set\" or \"unset\" fixes one)", err)
	}
	others, err := config.OtherMembers(text)
	if err != nil {
		return err
	}
	names := config.ScalarMembers()
	shown := make([]shownMember, len(names))
	for i, name := range names {
		value, set, err := config.MemberText(text, name)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		s := &shown[i]
		if !set {
			s.Default = true
			var ok bool
			if value, ok, s.Means = cfg.Default(name); !ok {
				continue
			}
		}
		if config.IsIntegerMember(name) {
			s.Value = json.RawMessage(value)
		} else {
			s.Value, _ = json.Marshal(value)
		}
	}
	if asJSON {
		var b bytes.Buffer
		b.WriteString(`{"members":{`)
		for i, name := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(name)
			v, _ := json.Marshal(shown[i])
			b.Write(k)
			b.WriteByte(':')
			b.Write(v)
		}
		b.WriteString(`},"also_set":`)
		list, _ := json.Marshal(append([]string{}, others...))
		b.Write(list)
		b.WriteByte('}')
		var out bytes.Buffer
		if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err := stdout.Write(out.Bytes())
		return err
	}
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	for i, name := range names {
		var value string
		switch s := shown[i]; {
		case s.Value == nil:
			value = "(default: " + s.Means + ")"
		case s.Default:
			value = showText(s.Value) + "  (default)"
		default:
			value = showText(s.Value)
		}
		fmt.Fprintf(stdout, "%-*s  %s\n", width, name, value)
	}
	if len(others) > 0 {
		fmt.Fprintf(stdout, "also set: %s\n", strings.Join(others, ", "))
	}
	return nil
}

// showText is a shown value as text: a string's characters, a number's
// digits.
func showText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
