package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/mcpgate"
	"github.com/decisionledger/ledger/policy"
)

// exampleDir is the reference catalog for server-filesystem.
const exampleDir = "../../examples/mcp"

// exampleRoot is the allowed directory examples/mcp is written for.
const exampleRoot = "/srv/agent-files"

// exampleTools are the tools server-filesystem 2026.8.31 lists.
var exampleTools = []string{"create_directory", "directory_tree", "edit_file", "get_file_info", "list_allowed_directories",
	"list_directory", "list_directory_with_sizes", "move_file", "read_file", "read_media_file", "read_multiple_files",
	"read_text_file", "search_files", "write_file"}

// exampleDeclarations parses examples/mcp/declarations, by action.
func exampleDeclarations(t *testing.T) map[string]*declare.Declaration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(exampleDir, "declarations", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]*declare.Declaration{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := declare.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if filepath.Base(f) != d.Action+".json" {
			t.Errorf("%s declares %s", f, d.Action)
		}
		decls[d.Action] = d
	}
	return decls
}

// The catalog declares every tool of server-filesystem 2026.8.31,
// reviewed and pinned; no path crosses whole and no content crosses at
// all; gateway.json is a config the gateway accepts, naming the same
// allowed directory as the policies.
func TestExampleCatalog(t *testing.T) {
	decls := exampleDeclarations(t)
	var names []string
	for action, d := range decls {
		switch {
		case d.Tool == nil || d.Tool.Server != "fs" || "fs."+d.Tool.Name != action:
			t.Errorf("%s: tool pin %+v", action, d.Tool)
		case !d.Reviewed():
			t.Errorf("%s: still a draft", action)
		}
		if d.Tool != nil {
			names = append(names, d.Tool.Name)
		}
		for _, f := range d.Fields {
			// A path crosses as its directory only, never raw; contents,
			// edits and patterns never.
			isPath := f.Name == "path" || f.Name == "source" || f.Name == "destination"
			switch {
			case f.Tier == tier.Policy && f.Type != declare.Boolean:
				t.Errorf("%s.%s: a policy-tier %s crosses raw", action, f.Name, f.Type)
			case isPath && (f.Tier != tier.Derived || !slices.Contains(f.Projections, "resource_dir")):
				t.Errorf("%s.%s: a path not projected to its directory", action, f.Name)
			case !isPath && f.Tier == tier.Derived && !slices.Equal(f.Projections, []string{"count"}):
				t.Errorf("%s.%s: projections %v", action, f.Name, f.Projections)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, exampleTools) {
		t.Errorf("declared tools %v, want %v", names, exampleTools)
	}

	cfg, err := mcpgate.LoadConfig(filepath.Join(exampleDir, "gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Allowlists["fs_roots"], []string{exampleRoot}) {
		t.Errorf("allowlists.fs_roots %v", cfg.Allowlists["fs_roots"])
	}
	if cmd := cfg.Servers["fs"].Command; len(cmd) == 0 || cmd[len(cmd)-1] != exampleRoot {
		t.Errorf("servers.fs.command %v: the server's root is not %s", cmd, exampleRoot)
	}
	if got, want := cfg.Path(cfg.DeclarationsDir), filepath.Join(exampleDir, "declarations"); got != want {
		t.Errorf("declarations_dir is %s, want %s", got, want)
	}
	// The README shows gateway.json as it is.
	readme, _ := os.ReadFile(filepath.Join(exampleDir, "README.md"))
	tmpl, _ := os.ReadFile(filepath.Join(exampleDir, "gateway.json"))
	if !strings.Contains(string(readme), "```json\n"+string(tmpl)+"```\n") {
		t.Error("README.md does not show gateway.json as it is")
	}
	pol, _ := os.ReadFile(filepath.Join(exampleDir, "policies", "fs.cedar"))
	if !strings.Contains(string(pol), `"`+exampleRoot+`"`) || !strings.Contains(string(pol), `"`+exampleRoot+`/*"`) {
		t.Errorf("the policies do not name %s", exampleRoot)
	}
}

// The example policies decide server-filesystem's calls as the README
// says: reads, listings and writes under the allowed directory allowed, a
// move within it needs approval, everything else denied — and a sibling
// whose name starts with the allowed directory's is not under it.
func TestExamplePolicies(t *testing.T) {
	decls := exampleDeclarations(t)
	var list []*declare.Declaration
	for _, d := range decls {
		list = append(list, d)
	}
	set, err := policy.Load(filepath.Join(exampleDir, "policies"), list)
	if err != nil {
		t.Fatal(err)
	}
	opts := declare.Options{Allowlists: map[string]map[string]bool{"fs_roots": {exampleRoot: true}}}
	const (
		allow    = entry.Allow
		deny     = entry.Deny
		approval = entry.NeedsApproval
		refused  = entry.Decision("refused by the gateway")
	)
	for _, c := range []struct {
		tool, args string
		want       entry.Decision
	}{
		{"write_file", `{"path":"/srv/agent-files/a.txt","content":"x"}`, allow},
		{"write_file", `{"path":"/srv/agent-files/notes/2026/a.txt","content":"x"}`, allow},
		{"write_file", `{"path":"/srv/agent-files-evil/a.txt","content":"x"}`, deny},
		{"write_file", `{"path":"/srv/agent-filesx/a.txt","content":"x"}`, deny},
		{"write_file", `{"path":"/srv/agent-files","content":"x"}`, deny}, // over the root itself
		{"write_file", `{"path":"/srv/other/agent-files/a.txt","content":"x"}`, deny},
		{"write_file", `{"path":"/etc/passwd","content":"x"}`, deny},
		{"write_file", `{"path":"a.txt","content":"x"}`, deny},
		{"write_file", `{"path":"/srv/agent-files/../agent-files-evil/a.txt","content":"x"}`, refused},
		{"write_file", `{"path":"/srv/agent-files/./a.txt","content":"x"}`, refused},
		{"write_file", `{"path":"//srv/agent-files/a.txt","content":"x"}`, refused},
		{"write_file", `{"path":"/srv/agent-files/a.txt"}`, refused},
		{"edit_file", `{"path":"/srv/agent-files/a.txt","edits":[{"oldText":"a","newText":"b"}],"dryRun":true}`, allow},
		{"edit_file", `{"path":"/srv/agent-files-evil/a.txt","edits":[]}`, deny},
		{"create_directory", `{"path":"/srv/agent-files/new"}`, allow},
		{"create_directory", `{"path":"/srv/agent-files-evil/new"}`, deny},
		{"read_text_file", `{"path":"/srv/agent-files/a.txt","head":3}`, allow},
		{"read_file", `{"path":"/srv/agent-files/a/b.txt","tail":1}`, allow},
		{"read_file", `{"path":"/srv/agent-files/a/b.txt","tail":1.5}`, refused}, // the strict domain: integers only
		{"read_media_file", `{"path":"/srv/agent-files/a.png"}`, allow},
		{"read_text_file", `{"path":"/srv/agent-files-evil/a.txt"}`, deny},
		{"read_multiple_files", `{"paths":["/srv/agent-files/a.txt"]}`, deny},
		{"list_directory", `{"path":"/srv/agent-files"}`, allow},
		{"list_directory", `{"path":"/srv/agent-files/notes"}`, allow},
		{"list_directory", `{"path":"/srv/agent-files-evil"}`, deny},
		{"list_directory", `{"path":"/srv"}`, deny},
		{"list_directory", `{"path":"/srv/agent-files/"}`, refused},
		{"list_directory_with_sizes", `{"path":"/srv/agent-files","sortBy":"size"}`, allow},
		{"directory_tree", `{"path":"/srv/agent-files","excludePatterns":["*.tmp"]}`, allow},
		{"directory_tree", `{"path":"/srv/agent-files-evil/x"}`, deny},
		{"search_files", `{"path":"/srv/agent-files/notes","pattern":"*.txt"}`, allow},
		{"search_files", `{"path":"/","pattern":"*"}`, refused},
		{"get_file_info", `{"path":"/srv/agent-files/a.txt"}`, allow},
		{"get_file_info", `{"path":"/srv/agent-files-evil"}`, deny},
		{"list_allowed_directories", `{}`, allow},
		{"move_file", `{"source":"/srv/agent-files/a.txt","destination":"/srv/agent-files/done/a.txt"}`, approval},
		{"move_file", `{"source":"/srv/agent-files/a.txt","destination":"/srv/agent-files-evil/a.txt"}`, deny},
		{"move_file", `{"source":"/srv/agent-files-evil/a.txt","destination":"/srv/agent-files/a.txt"}`, deny},
	} {
		d := decls["fs."+c.tool]
		res, err := d.Minimize([]byte(c.args), opts)
		got := refused
		if err == nil {
			got = set.Decide("agent:files-bot", d.Action, res.Attributes).Decision
			if strings.Contains(string(res.Attributes), "a.txt") || strings.Contains(string(res.Attributes), `"x"`) {
				t.Errorf("%s %s: attributes %s hold a file name or content", c.tool, c.args, res.Attributes)
			}
		} else if de := new(declare.Error); !errors.As(err, &de) {
			t.Errorf("%s %s: %v is not a *declare.Error", c.tool, c.args, err)
		}
		if got != c.want {
			t.Errorf("%s %s: %s, want %s", c.tool, c.args, got, c.want)
		}
	}

	// The determining policy of each kind of call, for the README.
	res, _ := decls["fs.move_file"].Minimize([]byte(`{"source":"/srv/agent-files/a","destination":"/srv/agent-files/b"}`), opts)
	if r := set.Decide("agent:files-bot", "fs.move_file", res.Attributes); !slices.Equal(r.Determining, []string{"fs.move-needs-approval"}) {
		t.Errorf("a move: determined by %v", r.Determining)
	}
	b, _ := json.Marshal(res.Attributes)
	if strings.Contains(string(b), "/srv/agent-files/a") {
		t.Errorf("a move's attributes hold a path: %s", b)
	}
}
