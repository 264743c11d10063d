package cliflag_test

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/cliflag"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args       string
		key        string
		json       bool
		positional []string
		err        string // "" for none
	}{
		{args: "--key K FILE", key: "K", positional: []string{"FILE"}},
		{args: "FILE --key K", key: "K", positional: []string{"FILE"}},
		{args: "--json FILE --key=K", key: "K", json: true, positional: []string{"FILE"}},
		{args: "A --json B -key K C", key: "K", json: true, positional: []string{"A", "B", "C"}},
		{args: "- --json", json: true, positional: []string{"-"}},
		{args: "FILE", positional: []string{"FILE"}},
		{args: "", positional: nil},
		// "--" ends the flags, wherever it stands.
		{args: "--key K -- --json", key: "K", positional: []string{"--json"}},
		{args: "FILE -- -x --key", positional: []string{"FILE", "-x", "--key"}},
		{args: "--json -- FILE --key K", json: true, positional: []string{"FILE", "--key", "K"}},
		// ... unless it is a flag's value.
		{args: "--key -- FILE --json", key: "--", json: true, positional: []string{"FILE"}},
		{args: "--json=true --key -- FILE", key: "--", json: true, positional: []string{"FILE"}},
		{args: "FILE --help", err: flag.ErrHelp.Error()},
		{args: "FILE -h", err: flag.ErrHelp.Error()},
		{args: "FILE --frob", err: "flag provided but not defined: -frob"},
		{args: "FILE --key", err: "flag needs an argument: -key"},
	} {
		t.Run(c.args, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			key := fs.String("key", "", "")
			json := fs.Bool("json", false, "")
			positional, err := cliflag.Parse(fs, strings.Fields(c.args))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %s", err, c.err)
				}
				if c.err == flag.ErrHelp.Error() && !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("error %v is not flag.ErrHelp", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *key != c.key || *json != c.json || !slices.Equal(positional, c.positional) {
				t.Fatalf("key %q, json %v, positional %q", *key, *json, positional)
			}
		})
	}
}
