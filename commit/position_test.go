package commit

import "testing"

func TestMemberPosition(t *testing.T) {
	body := []byte(`{"z":1,"attributes":{"b":[1,{"x":2}],"a":{"c":3}},"m":"x"}`)
	for _, c := range []struct {
		path []string
		name string
		want int
	}{
		{nil, "z", 0},
		{nil, "m", 2},
		{[]string{"attributes"}, "a", 1},
		{[]string{"attributes", "a"}, "c", 0},
		{nil, "absent", -1},
		{[]string{"z"}, "x", -1}, // not an object
		{[]string{"nowhere"}, "a", -1},
	} {
		if got := MemberPosition(body, c.path, c.name); got != c.want {
			t.Errorf("MemberPosition(%q, %q) = %d, want %d", c.path, c.name, got, c.want)
		}
	}
	if got := MemberPosition([]byte(`[1,2]`), nil, "a"); got != -1 {
		t.Errorf("in an array: %d, want -1", got)
	}
}
