package rooms

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/decisionledger/ledger"

// A room is a path prefix in the module (a package, or a tree of them).
type room struct {
	// mayImport lists the rooms this room's packages may import.
	mayImport []string
	// neverDepends lists module path prefixes outside this module that
	// must not be among the packages' dependencies at any depth.
	neverDepends []string
}

// stores are the storage engines' drivers: only a store, a cluster and the
// daemon that wires them may link one.
var stores = []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx"}

// rooms is docs/architecture.md's table. The verifier's row is the one the
// design stands on: an auditor's verifier builds without the ledger, a
// store or the server.
var rooms = map[string]room{
	"commit":   {mayImport: nil},
	"entry":    {mayImport: []string{"commit"}, neverDepends: stores},
	"approval": {mayImport: []string{"commit", "entry"}, neverDepends: stores},
	"policy":   {mayImport: []string{"commit", "entry"}, neverDepends: stores},
	"ledger":   {mayImport: []string{"commit", "entry", "internal/ed25519batch", "internal/signednote"}, neverDepends: stores},
	"storage":  {mayImport: []string{"ledger", "entry", "commit", "internal/pgurl"}},
	"verify":   {mayImport: []string{"commit", "entry", "policy", "internal/signednote"}, neverDepends: stores},
	"client":   {mayImport: []string{"verify", "entry", "commit", "approval/preview"}, neverDepends: stores},
	"mcpgate":  {mayImport: []string{"client", "verify", "entry", "commit", "approval/preview"}, neverDepends: stores},
	"catalog":  {mayImport: []string{"commit", "internal/declfile"}, neverDepends: stores},
	"config":   {mayImport: []string{"commit", "entry", "verify", "approval/approver", "internal/signednote", "internal/pgurl"}},
	"witness":  {mayImport: []string{"verify", "entry", "commit", "internal/signednote"}, neverDepends: stores},
	// ledgerd's HTTP API: the store comes through the ledger, never from
	// storage/* (config's PostgreSQL URL parsing links pgx).
	"server": {mayImport: []string{"ledger", "policy", "approval", "commit", "entry", "catalog", "config", "witness", "verify", "internal"}},
	// Its parts, which never import the server: the approver's page, the
	// approvals' state it reads, the policy set in force, the series.
	"server/approverpage": {mayImport: []string{"approval", "commit", "entry", "ledger", "server/approvals"}},
	"server/approvals":    {mayImport: []string{"approval", "commit", "entry", "ledger", "config"}},
	"server/policies":     {mayImport: []string{"catalog", "commit", "entry", "ledger", "policy", "server/metrics"}},
	"server/metrics":      {mayImport: []string{"witness"}, neverDepends: stores},

	// Shared helpers of the commands and tests: never the ledger, a store
	// or the daemon.
	"internal":          {mayImport: []string{"internal", "commit", "entry", "verify"}},
	"internal/rooms":    {},
	"internal/logtest":  {mayImport: []string{"commit", "entry"}, neverDepends: stores},
	"internal/pgtest":   {},
	"internal/keyflag":  {mayImport: []string{"internal/termtext", "verify"}, neverDepends: stores},
	"internal/declfile": {mayImport: []string{"commit"}, neverDepends: stores},
	// The listener's connection caps: the standard library only.
	"internal/connlimit": {},
	// The helpers that the tests of the server and of the daemon share
	// (clients of the API, a PostgreSQL store): only tests import it.
	"internal/apitest": {mayImport: []string{"internal", "commit", "entry", "approval", "ledger", "storage/postgres"}},

	// The commands wire the rooms; nothing imports a command.
	"cmd/ledgerd":        {mayImport: []string{"*"}},
	"cmd/ledger-verify":  {mayImport: []string{"verify", "policy", "entry", "commit", "internal"}, neverDepends: stores},
	"cmd/ledgerctl":      {mayImport: []string{"client", "verify", "entry", "commit", "internal"}, neverDepends: stores},
	"cmd/ledger-declare": {mayImport: []string{"commit", "internal"}, neverDepends: stores},
	"cmd/ledger-mcp":     {mayImport: []string{"mcpgate", "internal"}, neverDepends: stores},

	// Examples use the library as a mediator would.
	"examples": {mayImport: []string{"client", "verify", "entry", "commit", "approval/preview"}, neverDepends: stores},
	"bench":    {mayImport: []string{"client", "verify", "entry", "commit", "internal"}},
}

// roomOf is the longest prefix of path (relative to the module) in rooms.
func roomOf(path string) (string, bool) {
	best, found := "", false
	for r := range rooms {
		if (path == r || strings.HasPrefix(path, r+"/")) && len(r) >= len(best) {
			best, found = r, true
		}
	}
	return best, found
}

// within reports whether path is the room r or in its tree.
func within(path, r string) bool { return r == "*" || path == r || strings.HasPrefix(path, r+"/") }

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listModule(t *testing.T) []pkg {
	t.Helper()
	readSources(t)
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

// readSources reads every Go file of the module. go test caches a test's
// result against the files the test itself opened, not those go list read
// for it: without this, a new import would pass on a cached run.
func readSources(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "sdk":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// check returns the broken rules of the module's packages.
func check(pkgs []pkg) []string {
	var broken []string
	for _, p := range pkgs {
		path := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		r, ok := roomOf(path)
		if !ok {
			broken = append(broken, path+" is in no room: add it to the table (docs/architecture.md)")
			continue
		}
		rule := rooms[r]
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := strings.TrimPrefix(imp, module+"/")
			if within(to, r) && !within(to, "cmd") {
				continue // a room's packages may import each other
			}
			if within(to, "cmd") || !slices.ContainsFunc(rule.mayImport, func(a string) bool { return within(to, a) }) {
				broken = append(broken, path+" imports "+to+" (room "+r+" may import only "+strings.Join(rule.mayImport, ", ")+")")
			}
		}
		for _, dep := range p.Deps {
			for _, never := range rule.neverDepends {
				if strings.HasPrefix(dep, never) {
					broken = append(broken, path+" depends on "+dep)
				}
			}
		}
	}
	return broken
}

// TestArrowsPointOneWay holds every package of the module to its room's
// row.
func TestArrowsPointOneWay(t *testing.T) {
	for _, b := range check(listModule(t)) {
		t.Error(b)
	}
}

// TestRulesBite shows the check refusing what the design forbids: the
// verifier importing the ledger, a store's driver under the client, a
// package with no room, any import of a command, the server importing a
// store, and the approver's page reaching back into the server.
func TestRulesBite(t *testing.T) {
	for _, c := range []struct {
		name string
		p    pkg
		want string
	}{
		{"verify imports ledger", pkg{ImportPath: module + "/verify", Imports: []string{module + "/ledger"}}, "verify imports ledger"},
		{"client links badger", pkg{ImportPath: module + "/client", Deps: []string{"github.com/dgraph-io/badger/v4"}}, "client depends on github.com/dgraph-io/badger/v4"},
		{"a package with no room", pkg{ImportPath: module + "/somewhere"}, "somewhere is in no room"},
		{"storage imports the daemon", pkg{ImportPath: module + "/storage/badger", Imports: []string{module + "/cmd/ledgerd"}}, "storage/badger imports cmd/ledgerd"},
		{"a command imports another", pkg{ImportPath: module + "/cmd/ledgerd", Imports: []string{module + "/cmd/ledgerctl"}}, "cmd/ledgerd imports cmd/ledgerctl"},
		{"the server imports a store", pkg{ImportPath: module + "/server", Imports: []string{module + "/storage/postgres"}}, "server imports storage/postgres"},
		{"the approver's page imports the server", pkg{ImportPath: module + "/server/approverpage", Imports: []string{module + "/server"}}, "server/approverpage imports server"},
	} {
		got := check([]pkg{c.p})
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: check = %q, want one report starting %q", c.name, got, c.want)
		}
	}
}
