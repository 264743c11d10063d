package commit

import (
	"errors"
	"slices"
	"testing"
)

func TestObject(t *testing.T) {
	o, err := Domain{}.Object([]byte(` {"s":"caf\u00e9","i":1e2,"l":["a","b"],"o":{"z":1,"a":[true,null]},"n":null} `))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range o.Len() {
		names = append(names, o.Name(i))
	}
	if !slices.Equal(names, []string{"i", "l", "n", "o", "s"}) {
		t.Errorf("names %q", names)
	}
	get := func(name string) Value {
		v, ok := o.Get(name)
		if !ok {
			t.Fatalf("no member %q", name)
		}
		return v
	}
	if s, ok := get("s").Text(); !ok || s != "café" {
		t.Errorf("s = %q, %v", s, ok)
	}
	if i, ok := get("i").Integer(); !ok || i != 100 {
		t.Errorf("i = %d, %v", i, ok)
	}
	if l, ok := get("l").TextList(); !ok || !slices.Equal(l, []string{"a", "b"}) {
		t.Errorf("l = %q, %v", l, ok)
	}
	if c := string(get("o").Canonical()); !get("o").IsObject() || c != `{"a":[true,null],"z":1}` {
		t.Errorf("o = %s", c)
	}
	// Each accessor refuses every other kind.
	for _, name := range []string{"i", "l", "n", "o"} {
		if _, ok := get(name).Text(); ok {
			t.Errorf("%s read as text", name)
		}
	}
	for _, name := range []string{"s", "l", "n", "o"} {
		if _, ok := get(name).Integer(); ok {
			t.Errorf("%s read as an integer", name)
		}
	}
	for _, name := range []string{"s", "i", "n", "o"} {
		if _, ok := get(name).TextList(); ok {
			t.Errorf("%s read as a list", name)
		}
	}
	if _, ok := get("o").TextList(); ok || get("s").IsObject() {
		t.Error("kinds confused")
	}
	if _, ok := o.Get("missing"); ok {
		t.Error("a missing member found")
	}
	mixed, err := Domain{}.Object([]byte(`{"l":["a",1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := mixed.Get("l"); v.n.kind != kindArray {
		t.Fatal("not an array")
	} else if _, ok := v.TextList(); ok {
		t.Error("a list with a number read as a list of text")
	}
}

func TestObjectRefuses(t *testing.T) {
	for text, want := range map[string]Kind{
		`[1]`:                    ErrNotObject,
		`"s"`:                    ErrNotObject,
		`{"a":1,"a":2}`:          ErrDuplicateKey,
		`{"a":"\u0065\u0301"}`:   ErrNotNFC,
		`{"a":1} {"b":2}`:        ErrSyntax,
		"{\"a\":\"\xff\"}":       ErrInvalidUTF8,
		`{"a":9007199254740992}`: ErrIntegerRange,
	} {
		_, err := Domain{}.Object([]byte(text))
		var de *DomainError
		if !errors.As(err, &de) || de.Kind != want {
			t.Errorf("%s: %v; want %s", text, err, want)
		}
	}
}
