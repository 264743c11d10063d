// Package declfile reads action declaration files (docs/declarations.md)
// for the commands that take them, ledger-declare and ledgerd's
// catalog_dir, and compiles the JSON Schema each declaration generates.
// It lives apart from commit/declare, which imports only the standard
// library and commit, so that the workload SDK carries no validator.
package declfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/decisionledger/ledger/commit/declare"
)

// ErrRefused marks a file that was read but is not an acceptable
// declaration, as opposed to one that could not be read.
var ErrRefused = errors.New("declaration refused")

// File is one declaration file as read.
type File struct {
	Path string
	Data []byte // the file's bytes, exactly
	Decl *declare.Declaration
}

// Read reads and parses the files in the order given. It refuses, with an
// error wrapping ErrRefused and naming the file, a declaration that does
// not parse and two files that declare one action.
func Read(paths []string) ([]File, error) {
	files := make([]File, 0, len(paths))
	from := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		d, err := declare.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrRefused, p, err)
		}
		if other, dup := from[d.Action]; dup {
			return nil, fmt.Errorf("%w: %s and %s both declare action %s", ErrRefused, other, p, d.Action)
		}
		from[d.Action] = p
		files = append(files, File{Path: p, Data: data, Decl: d})
	}
	return files, nil
}

// CompileSchema compiles the JSON Schema of d's wire attributes
// (Declaration.JSONSchema) with santhosh-tekuri/jsonschema.
func CompileSchema(d *declare.Declaration) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.JSONSchema()))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "urn:decision-ledger:attributes:" + d.Action
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}
