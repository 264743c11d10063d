package referencecalls

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
)

// Every call of the reference table, committed with the hiding commitment:
// each subset of its fields, disclosed through a file, opens the
// commitment; each disclosed field's attribute, recomputed from its value
// alone (declare.FieldAttribute, what ledger-verify disclose runs), is
// the one Minimize recorded; and a value changed in any field is refused
// naming that field.
func TestDisclosuresOfReferenceCalls(t *testing.T) {
	decls, err := Declarations(filepath.Join("..", "..", "testdata", "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	byAction := map[string]*declare.Declaration{}
	for _, d := range decls {
		byAction[d.Action] = d
	}
	opts := declare.Options{Allowlists: Allowlists, Domain: commit.Domain{MaxBytes: 4 << 20}}
	subsets := 0
	for _, c := range Table() {
		d := byAction[c.Action]
		raw, err := json.Marshal(c.Params)
		if err != nil {
			t.Fatal(err)
		}
		hiding := opts
		hiding.Openings = commit.RandomOpenings()
		res, err := d.Minimize(raw, hiding)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var recorded map[string]json.RawMessage
		if err := json.Unmarshal(res.Attributes, &recorded); err != nil {
			t.Fatal(err)
		}
		fields := res.Disclosure.Fields()
		for mask := 0; mask < 1<<len(fields); mask++ {
			var names []string
			for i, f := range fields {
				if mask&(1<<i) != 0 {
					names = append(names, f)
				}
			}
			part, err := res.Disclosure.Only(names...)
			if err != nil {
				t.Fatal(err)
			}
			file, _ := part.MarshalJSON()
			x, err := commit.ParseDisclosure(file, opts.Domain)
			if err != nil {
				t.Fatalf("%s %v: %v", c.Name, names, err)
			}
			if err := x.Check(res.Params); err != nil {
				t.Errorf("%s: disclosing %v: %v", c.Name, names, err)
			}
			subsets++
		}
		for _, name := range fields {
			value, _ := res.Disclosure.Value(name)
			attr, crosses, err := d.FieldAttribute(name, value, opts)
			if _, declared := d.Field(name); !declared {
				if !errors.As(err, new(*declare.Error)) || recorded[name] != nil {
					t.Errorf("%s: undeclared %s: %v, recorded %s", c.Name, name, err, recorded[name])
				}
				continue
			}
			switch {
			case err != nil:
				t.Errorf("%s: %s: %v", c.Name, name, err)
			case crosses != (recorded[name] != nil):
				t.Errorf("%s: %s: crosses %v, recorded %s", c.Name, name, crosses, recorded[name])
			case crosses && !bytes.Equal(attr, recorded[name]):
				t.Errorf("%s: %s: recomputed %s, recorded %s", c.Name, name, attr, recorded[name])
			}
			// The value changed: refused naming the field.
			changed, _ := res.Disclosure.MarshalJSON()
			changed = bytes.Replace(changed, append([]byte(`"value":`), value...), []byte(`"value":"changed"`), 1)
			x, err := commit.ParseDisclosure(changed, opts.Domain)
			if err != nil {
				t.Fatal(err)
			}
			var de *commit.DisclosureError
			if err := x.Check(res.Params); !errors.As(err, &de) || de.Kind != commit.ErrFieldMismatch || de.Field != name {
				if !bytes.Equal(value, []byte(`"changed"`)) {
					t.Errorf("%s: %s changed: %v", c.Name, name, err)
				}
			}
		}
	}
	t.Logf("%d calls, %d disclosed subsets", len(Table()), subsets)
}
