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

// stores are the storage engines' drivers, "store drivers" in the table.
var stores = []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx"}

const (
	tablePath  = "../../docs/architecture.md"
	tableBegin = "<!-- BEGIN rooms: read by internal/rooms -->"
	tableEnd   = "<!-- END rooms -->"
)

// readRooms parses docs/architecture.md's table of rooms: each row's room,
// the rooms it may import ("—" none, "everything" any) and what it never
// links ("—" or "store drivers").
func readRooms(t *testing.T) map[string]room {
	t.Helper()
	doc, err := os.ReadFile(tablePath)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), tableBegin)
	table, _, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers of the rooms table", tablePath)
	}
	code := func(cell string) (string, bool) {
		cell = strings.TrimSpace(cell)
		return strings.Trim(cell, "`"), len(cell) > 2 && cell[0] == '`' && cell[len(cell)-1] == '`'
	}
	rooms := map[string]room{}
	for i, line := range strings.Split(strings.TrimSpace(table), "\n")[2:] {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 4 {
			t.Fatalf("%s: row %d of the rooms table has %d cells, not 4: %q", tablePath, i+1, len(cells), line)
		}
		name, ok := code(cells[0])
		if !ok {
			t.Fatalf("%s: row %d: the room %q is not a `path`", tablePath, i+1, cells[0])
		}
		if _, dup := rooms[name]; dup {
			t.Fatalf("%s: the room %s has two rows", tablePath, name)
		}
		var r room
		switch imports := strings.TrimSpace(cells[2]); imports {
		case "—":
		case "everything":
			r.mayImport = []string{"*"}
		default:
			for _, c := range strings.Split(imports, ", ") {
				to, ok := code(c)
				if !ok {
					t.Fatalf("%s: room %s: %q in \"may import\" is not a `path`", tablePath, name, c)
				}
				r.mayImport = append(r.mayImport, to)
			}
		}
		switch never := strings.TrimSpace(cells[3]); never {
		case "—":
		case "store drivers":
			r.neverDepends = stores
		default:
			t.Fatalf("%s: room %s: \"never links\" is %q, not — or store drivers", tablePath, name, never)
		}
		rooms[name] = r
	}
	if len(rooms) < 10 {
		t.Fatalf("%s: only %d rooms read", tablePath, len(rooms))
	}
	return rooms
}

// roomOf is the longest prefix of path (relative to the module) in rooms.
func roomOf(rooms map[string]room, path string) (string, bool) {
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
func check(rooms map[string]room, pkgs []pkg) []string {
	var broken []string
	for _, p := range pkgs {
		path := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		r, ok := roomOf(rooms, path)
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
	for _, b := range check(readRooms(t), listModule(t)) {
		t.Error(b)
	}
}

// TestRulesBite shows the check refusing what the design forbids: the
// verifier importing the ledger, a store's driver under the client, a
// package with no room, any import of a command, the server importing a
// store, and the approver's page reaching back into the server.
func TestRulesBite(t *testing.T) {
	rooms := readRooms(t)
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
		got := check(rooms, []pkg{c.p})
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: check = %q, want one report starting %q", c.name, got, c.want)
		}
	}
}

// TestVerifierStandsAlone holds the verifier's row itself, not only through
// the table: an edit of docs/architecture.md that let verify/ reach the
// ledger, a store, the server or the client fails here.
func TestVerifierStandsAlone(t *testing.T) {
	v, ok := readRooms(t)["verify"]
	if !ok {
		t.Fatal("the table has no verify row")
	}
	for _, to := range v.mayImport {
		for _, never := range []string{"ledger", "storage", "server", "daemon", "cluster", "client", "config"} {
			if to == "*" || within(to, never) || within(never, to) {
				t.Errorf("the table lets verify import %s", to)
			}
		}
	}
	if !slices.Equal(v.neverDepends, stores) {
		t.Errorf("the table lets verify link a store driver (never links: %q)", v.neverDepends)
	}
}
