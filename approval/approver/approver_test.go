package approver

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestMayApprove(t *testing.T) {
	for _, c := range []struct {
		name              string
		a                 Approver
		action, principal string
		err               error
	}{
		{"listed action", Approver{Name: "alice", Actions: []string{"refund", "send_email"}}, "send_email", "agent:billing", nil},
		{"all actions", Approver{Name: "alice", Actions: []string{"*"}}, "delete_repo", "agent:ops", nil},
		{"unlisted action", Approver{Name: "alice", Actions: []string{"refund"}}, "send_email", "agent:billing", ErrNotAction},
		{"action prefix", Approver{Name: "alice", Actions: []string{"send"}}, "send_email", "agent:billing", ErrNotAction},
		{"listed principal", Approver{Name: "alice", Actions: []string{"*"}, Principals: []string{"agent:a", "agent:b"}}, "refund", "agent:b", nil},
		{"unlisted principal", Approver{Name: "alice", Actions: []string{"*"}, Principals: []string{"agent:a"}}, "refund", "agent:b", ErrNotPrincipal},
		{"principal case", Approver{Name: "alice", Actions: []string{"*"}, Principals: []string{"agent:a"}}, "refund", "Agent:a", ErrNotPrincipal},
		{"self", Approver{Name: "alice", Actions: []string{"refund"}}, "refund", "alice", ErrSelfApproval},
		{"self, all actions", Approver{Name: "alice", Actions: []string{"*"}}, "refund", "alice", ErrSelfApproval},
		{"self, listed principal", Approver{Name: "alice", Actions: []string{"*"}, Principals: []string{"alice", "bob"}}, "refund", "alice", ErrSelfApproval},
		{"self, unlisted action", Approver{Name: "alice", Actions: []string{"x"}}, "refund", "alice", ErrSelfApproval},
		{"another with a similar name", Approver{Name: "alice", Actions: []string{"*"}}, "refund", "alice ", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.a.MayApprove(c.action, c.principal)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("MayApprove(%q, %q) = %v, want %v", c.action, c.principal, err, c.err)
			}
			if err == nil {
				return
			}
			var re *RefusalError
			if !errors.As(err, &re) || re.Approver != c.a.Name || re.Action != c.action || re.Principal != c.principal {
				t.Fatalf("error %#v does not carry the approver, action and principal", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	ok := Approver{Name: "alice", PasswordHash: good, Actions: []string{"refund"}, Principals: []string{"agent:a"}}
	if err := ok.Check(); err != nil {
		t.Fatalf("the base case: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*Approver)
		want   string
	}{
		{"no name", func(a *Approver) { a.Name = "" }, "name: empty"},
		{"129-byte name", func(a *Approver) { a.Name = strings.Repeat("a", 129) }, "name: 129 bytes"},
		{"control character", func(a *Approver) { a.Name = "ali\x1bce" }, "name: "},
		{"bidi override", func(a *Approver) { a.Name = "ali\u202ece" }, "name: "},
		{"not NFC", func(a *Approver) { a.Name = "jose\u0301" }, "name: not in NFC"},
		{"unstable normalization", func(a *Approver) { a.Name = "ana\U0001e08f" }, "name: holds a code point whose normalization depends on the Unicode version"},
		{"not UTF-8", func(a *Approver) { a.Name = "ali\xffce" }, "name: not valid UTF-8"},
		{"no hash", func(a *Approver) { a.PasswordHash = "" }, "password_argon2id: "},
		{"bad hash", func(a *Approver) { a.PasswordHash = strings.Replace(good, "t=1", "t=11", 1) }, "password_argon2id: t=11"},
		{"no actions", func(a *Approver) { a.Actions = nil }, "actions: none"},
		{"empty action", func(a *Approver) { a.Actions = []string{"refund", ""} }, "actions[1]: empty"},
		{"principal *", func(a *Approver) { a.Principals = []string{"*"} }, "principals[0]: \"*\" is not a wildcard"},
		{"empty principal", func(a *Approver) { a.Principals = []string{""} }, "principals[0]: empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ok
			c.change(&a)
			err := a.Check()
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("Check() = %v, want an error starting %q", err, c.want)
			}
			if strings.Contains(err.Error(), goodKey[:20]) {
				t.Fatalf("error %q repeats the hash", err)
			}
		})
	}
	ok.Name = strings.Repeat("é", 64) // 128 bytes
	if err := ok.Check(); err != nil {
		t.Fatalf("a 128-byte name: %v", err)
	}
}

func TestByName(t *testing.T) {
	as := []Approver{
		{Name: "alice", PasswordHash: good, Actions: []string{"refund"}},
		{Name: "bob", PasswordHash: good, Actions: []string{"*"}},
	}
	find, err := ByName(as)
	if err != nil {
		t.Fatal(err)
	}
	as[0].Actions[0] = "changed"
	if a, ok := find("alice"); !ok || a.Name != "alice" || !slices.Equal(a.Actions, []string{"refund"}) {
		t.Fatalf("find(alice) = %+v, %v", a, ok)
	}
	if _, ok := find("carol"); ok {
		t.Fatal("found carol")
	}
	if _, err := ByName(append(as, Approver{Name: "alice", PasswordHash: good, Actions: []string{"*"}})); err == nil || !strings.Contains(err.Error(), `approvers[2]: name "alice" repeated`) {
		t.Fatalf("a repeated name: %v", err)
	}
	if _, err := ByName([]Approver{{Name: "alice", Actions: []string{"*"}}}); err == nil || !strings.HasPrefix(err.Error(), "approvers[0]: password_argon2id") {
		t.Fatalf("no hash: %v", err)
	}
}

// TestJSON fixes the config's member names.
func TestJSON(t *testing.T) {
	const text = `{"name":"alice","password_argon2id":"` + good + `","actions":["refund","*"],"principals":["agent:a"]}`
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var a Approver
	if err := dec.Decode(&a); err != nil {
		t.Fatal(err)
	}
	want := Approver{Name: "alice", PasswordHash: good, Actions: []string{"refund", "*"}, Principals: []string{"agent:a"}}
	if a.Name != want.Name || a.PasswordHash != want.PasswordHash || !slices.Equal(a.Actions, want.Actions) || !slices.Equal(a.Principals, want.Principals) {
		t.Fatalf("decoded %+v, want %+v", a, want)
	}
	out, _ := json.Marshal(want)
	if string(out) != text {
		t.Fatalf("encoded %s, want %s", out, text)
	}
	want.Principals = nil
	out, _ = json.Marshal(want)
	if bytes.Contains(out, []byte("principals")) {
		t.Fatalf("encoded %s: empty principals written", out)
	}
}
