package main

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/internal/declfile"
)

// catalog is the server's action declarations (docs/declarations.md), by
// action. With a catalog, an append must name a declared action, carry
// attributes its generated JSON Schema accepts and the applied-tiers digest
// of its declaration; the entry then records the declaration's action
// definition digest.
type catalog map[string]*catalogAction

type catalogAction struct {
	decl       *declare.Declaration
	file       []byte // the declaration as read, served at /v1/actions/{action}
	tiers      commit.Digest
	definition commit.Digest
	schema     *jsonschema.Schema
}

// loadCatalog reads every *.json file in dir as a declaration. It refuses
// an empty directory, a declaration that does not parse, and two files for
// one action.
func loadCatalog(dir string) (catalog, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("catalog_dir %s holds no declaration (*.json)", dir)
	}
	sort.Strings(files)
	read, err := declfile.Read(files)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	c := catalog{}
	for _, df := range read {
		f, d := df.Path, df.Decl
		a := &catalogAction{decl: d, file: df.Data}
		if a.tiers, err = d.TiersDigest(); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", f, err)
		}
		if a.definition, err = d.Digest(); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", f, err)
		}
		if a.schema, err = declfile.CompileSchema(d); err != nil {
			return nil, fmt.Errorf("catalog: %s: the generated JSON Schema does not compile: %w", f, err)
		}
		c[d.Action] = a
	}
	return c, nil
}

// checkAttributes validates attributes (JSON) against the action's wire
// schema. The problem it returns names the attribute by its JSON pointer
// when the declaration names it, and never repeats a value or a name the
// client made up.
func (a *catalogAction) checkAttributes(attributes []byte) (problem string, ok bool) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(attributes))
	if err != nil {
		return "the attributes are not JSON", false
	}
	err = a.schema.Validate(v)
	if err == nil {
		return "", true
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "the attributes do not match the declaration", false
	}
	// The deepest cause says where; its location is a list of tokens.
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := ve.InstanceLocation
	if len(loc) == 0 {
		return "the attributes are not an object with exactly the declared fields", false
	}
	if _, declared := a.decl.Field(loc[0]); !declared {
		return "an attribute the declaration does not name", false
	}
	// Below a declared field, only projection names are declared.
	safe := []string{loc[0]}
	if len(loc) > 1 {
		if f, _ := a.decl.Field(loc[0]); containsString(f.Projections, loc[1]) {
			safe = append(safe, loc[1])
		} else {
			return fmt.Sprintf("/%s holds a member its declaration does not name, or is not an object", loc[0]), false
		}
	}
	return fmt.Sprintf("/%s does not match its declaration", strings.Join(safe, "/")), false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
