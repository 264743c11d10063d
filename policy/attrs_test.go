package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/policy"
)

// A policy that names an attribute the schema does not declare is refused,
// whether the validator would have typed the access as False (has X on a
// record without X), never looked at it (the right of false && …), or
// refused it anyway: the *LoadError names the attribute's line and column
// and the policy's id, the *AttributeError the receiver, the name, the
// actions searched and the nearest declared name. Hand-written
// expectations: the refused policy is at line 4, its condition on line 6.
func TestLoadRefusesUndeclaredAttribute(t *testing.T) {
	decls := declarations(t)
	const pay = `forbid (principal, action == Action::"make_payment", resource)`
	const mail = `forbid (principal, action == Action::"send_email", resource)`
	all := []string{"http_request", "make_payment", "read_record", "send_email", "upload_file"}
	for _, tc := range []struct {
		name      string
		scope     string
		cond      string
		col       int
		receiver  string
		attribute string
		nearest   string
		actions   []string
	}{
		// The review's cases: a typo of amount_minor, payload fields.
		{"has, a typo", pay, `when { context has amount && context.amount > 100000 };`, 20, "context", "amount", "amount_minor", []string{"make_payment"}},
		{"has, a payload field", mail, `when { context has subject };`, 20, "context", "subject", "body", []string{"send_email"}},
		{"has, then like", pay, `when { context has memo && context.memo like "x*" };`, 20, "context", "memo", "payee", []string{"make_payment"}},
		{"right of false &&", pay, `when { false && context.amount == 5 };`, 25, "context", "amount", "amount_minor", []string{"make_payment"}},
		{"unless", pay, `unless { context has amount };`, 22, "context", "amount", "amount_minor", []string{"make_payment"}},
		// Nested records and has chains.
		{"nested record", pay, `when { context.payee has payee_name };`, 26, "context.payee", "payee_name", "payee_known", []string{"make_payment"}},
		{"has chain", pay, `when { context has payee.payee_nme };`, 26, "context.payee", "payee_nme", "payee_known", []string{"make_payment"}},
		// Entities: Agent, Tool and actions declare no attributes.
		{"principal", pay, `when { principal has role };`, 22, "principal", "role", "", nil},
		{"resource", pay, `when { resource.owner == principal };`, 17, "resource", "owner", "", nil},
		{"action", pay, `when { action has risk };`, 19, "action", "risk", "", nil},
		{"entity literal", pay, `when { Agent::"ops".team == "a" };`, 21, "", "team", "", nil},
		// Every kind of sub-expression.
		{"inside if", pay, `when { if context.amount_minor > 5 then context has memo else false };`, 53, "context", "memo", "payee", []string{"make_payment"}},
		{"in a set", pay, `when { [context.memo].isEmpty() };`, 17, "context", "memo", "payee", []string{"make_payment"}},
		{"method argument", pay, `when { ["EUR"].contains(context.memo) };`, 33, "context", "memo", "payee", []string{"make_payment"}},
		{"like", pay, `when { context.memo like "x*" };`, 16, "context", "memo", "payee", []string{"make_payment"}},
		{"in", pay, `when { principal in context.approvers };`, 29, "context", "approvers", "payee", []string{"make_payment"}},
		{"is", mail, `when { context.owner is Agent };`, 16, "context", "owner", "body", []string{"send_email"}},
		{"record literal", pay, `when { {a: context.amount_minor} has b };`, 38, "", "b", "a", nil},
		{"record literal, a key not an identifier", pay, `when { {"someone@example.com": 1} has b };`, 39, "", "b", "", nil},
		{"string-named attribute", pay, `when { context["someone@example.com"] == 1 };`, 16, "context", "", "amount_minor", []string{"make_payment"}},
		// Scopes of several actions: declared by none of them.
		{"every action", `forbid (principal, action, resource)`, `when { context has amount };`, 20, "context", "amount", "amount_minor", all},
		{"a set of actions", `forbid (principal, action in [Action::"send_email", Action::"make_payment"], resource)`, `when { context has memo_text };`, 20, "context", "memo_text", "recipient", []string{"make_payment", "send_email"}},
		// Positions: the first refused attribute in the text; the same
		// name declared elsewhere is not it; columns count code points.
		{"after a declared one", pay, `when { context.amount_minor > 0 && context has amount };`, 48, "context", "amount", "amount_minor", []string{"make_payment"}},
		{"the first of two", pay, `when { context has amountt || context has amount };`, 20, "context", "amountt", "amount_minor", []string{"make_payment"}},
		{"declared on another record", pay, `when { context.payee.payee_known && context has payee_known };`, 49, "context", "payee_known", "payee", []string{"make_payment"}},
		{"code points", pay, `when { "é" == "é" || context has amount };`, 34, "context", "amount", "amount_minor", []string{"make_payment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := okPolicy + `@id("refused")` + "\n" + tc.scope + "\n" + tc.cond + "\n"
			_, err := policy.New([]policy.File{{Name: "refused.cedar", Bytes: []byte(src)}}, decls)
			var le *policy.LoadError
			var ae *policy.AttributeError
			if !errors.As(err, &le) || !errors.As(err, &ae) {
				t.Fatalf("got %v, want a *LoadError with an *AttributeError", err)
			}
			if !errors.Is(err, policy.ErrSchema) {
				t.Errorf("%v: not ErrSchema", err)
			}
			if le.File != "refused.cedar" || le.Line != 6 || le.Column != tc.col || le.ID != "refused" {
				t.Errorf("%v: at %s:%d:%d id %q, want refused.cedar:6:%d id \"refused\"", err, le.File, le.Line, le.Column, le.ID, tc.col)
			}
			// subject and memo are payload fields of send_email and make_payment.
			payload := tc.receiver == "context" && (tc.attribute == "subject" || tc.attribute == "memo")
			if ae.Receiver != tc.receiver || ae.Attribute != tc.attribute || ae.Nearest != tc.nearest || !slices.Equal(ae.Actions, tc.actions) || ae.Payload != payload {
				t.Errorf("%+v, want receiver %q attribute %q nearest %q actions %v payload %v", *ae, tc.receiver, tc.attribute, tc.nearest, tc.actions, payload)
			}
			if strings.Contains(err.Error(), "someone") || strings.Contains(err.Error(), "x*") {
				t.Errorf("error names a value: %v", err)
			}
			t.Log(err)
		})
	}
}

// The messages of the review's first two cases, in full.
func TestAttributeErrorMessage(t *testing.T) {
	for _, tc := range []struct{ file, src, want string }{
		{"payments.cedar", `@id("payments.deny-large")
forbid (principal, action == Action::"make_payment", resource)
when { context has amount && context.amount > 100000 };
`, `policy: payments.cedar:3:20: policy "payments.deny-large": names an undeclared attribute: context has no attribute "amount" in the declaration of make_payment; the nearest declared is "amount_minor"`},
		{"email.cedar", `@id("email.deny-subject")
forbid (principal, action == Action::"send_email", resource)
when { context has subject && context.subject like "*invoice*" };
`, `policy: email.cedar:3:20: policy "email.deny-subject": names an undeclared attribute: context has no attribute "subject" in the declaration of send_email: it is a payload field, which never reaches ledgerd or a policy`},
	} {
		_, err := policy.New([]policy.File{{Name: tc.file, Bytes: []byte(tc.src)}}, declarations(t))
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}

// The validator quotes the string an extension constructor refuses; the
// refusal does not, alive or in a branch no request reaches.
func TestValidatorErrorNamesNoLiteral(t *testing.T) {
	for _, cond := range []string{
		`when { ip("LITERAL-ip-7731").isIpv4() };`,
		`when { false && ip("LITERAL-ip-7731").isIpv4() };`,
		`when { context.currency == "EUR" && decimal("LITERAL-7731") == decimal("1.0") };`,
	} {
		src := okPolicy + `@id("refused")` + "\n" + `forbid (principal, action == Action::"make_payment", resource)` + "\n" + cond + "\n"
		_, err := policy.New([]policy.File{{Name: "refused.cedar", Bytes: []byte(src)}}, declarations(t))
		if !errors.Is(err, policy.ErrSchema) {
			t.Fatalf("%s: got %v, want ErrSchema", cond, err)
		}
		for e := error(err); e != nil; e = errors.Unwrap(e) {
			if strings.Contains(e.Error(), "7731") {
				t.Errorf("the error quotes a literal: %v", e)
			}
		}
		if !strings.Contains(err.Error(), "`<string literal>`") {
			t.Errorf("%v: no `<string literal>`", err)
		}
		t.Log(err)
	}
}

// cedar-go's validator does not typecheck a branch a constant condition
// cuts off (the right of false && …); such a branch is typechecked too,
// for at least one of the policy's actions. The refusal names the
// policy's position, as the validator's do.
func TestLoadRefusesUnreachedBranch(t *testing.T) {
	decls := declarations(t)
	const pay = `forbid (principal, action == Action::"make_payment", resource)`
	for _, tc := range []struct{ name, scope, cond string }{
		{"false &&", pay, `when { false && context.amount_minor == "x" };`},
		{"true ||", pay, `when { true || context.amount_minor == "x" };`},
		{"if true, else", pay, `when { if true then true else context.amount_minor == "x" };`},
		{"if false, then", pay, `when { if false then context.amount_minor == "x" else true };`},
		{"nested", pay, `when { false && (false && context.amount_minor == "x") };`},
		{"a comparison of literals", pay, `when { 1 == 2 && context.amount_minor == "x" };`},
		{"an impossible is", pay, `when { principal is Tool && context.amount_minor == "x" };`},
		{"unless", pay, `unless { false && context.amount_minor == "x" };`},
		{"every action", `forbid (principal, action, resource)`, `when { false && context.amount_minor == "x" };`},
		{"optional without has", `forbid (principal, action == Action::"send_email", resource)`, `when { false && context.attachment_hashes.contains("sha256:00") };`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := okPolicy + `@id("refused")` + "\n" + tc.scope + "\n" + tc.cond + "\n"
			_, err := policy.New([]policy.File{{Name: "refused.cedar", Bytes: []byte(src)}}, decls)
			var le *policy.LoadError
			if !errors.As(err, &le) || !errors.Is(err, policy.ErrSchema) {
				t.Fatalf("got %v, want a *LoadError, ErrSchema", err)
			}
			if le.Line != 4 || le.Column != 1 || le.ID != "refused" || !strings.Contains(le.Problem, "no request evaluates") {
				t.Errorf("%v: want refused.cedar:4:1, id \"refused\", a branch no request evaluates", err)
			}
			t.Log(err)
		})
	}
}

// What the checks must not refuse: attributes declared by one of the
// policy's actions, has on optional attributes, has chains, and branches
// cut off by a constant that typecheck.
func TestLoadAcceptsDeclaredAttributes(t *testing.T) {
	decls := declarations(t)
	for _, src := range []string{
		`permit (principal, action == Action::"make_payment", resource) when { false && context.amount_minor == 5 };`,
		`permit (principal, action, resource) when { false && context.amount_minor > 5 };`,
		`permit (principal, action, resource) when { context has amount_minor && context.amount_minor > 5 };`,
		`permit (principal, action in [Action::"send_email", Action::"http_request"], resource) when { context has body && context.body.byte_size > 5 };`,
		`permit (principal, action == Action::"send_email", resource) when { context has attachment_hashes && (false && context.attachment_hashes.contains("x")) };`,
		`permit (principal, action == Action::"make_payment", resource) when { context has payee.payee_known && context.payee.payee_known };`,
		`permit (principal, action == Action::"make_payment", resource) when { if context.amount_minor > 5 then context.payee.payee_known else false };`,
		`permit (principal, action == Action::"make_payment", resource) when { (if true then context.payee else context.payee).payee_known };`,
		`permit (principal, action == Action::"make_payment", resource) when { {a: context.payee}.a.payee_known };`,
		`permit (principal, action == Action::"make_payment", resource) when { context["currency"] == "EUR" };`,
		`permit (principal, action == Action::"make_payment", resource) when { false };`,
		`permit (principal, action == Action::"make_payment", resource) unless { true };`,
	} {
		src := `@id("ok")` + "\n" + src + "\n"
		if _, err := policy.New([]policy.File{{Name: "ok.cedar", Bytes: []byte(src)}}, decls); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	reference(t) // the reference set loads
}

// Parse errors keep the position and the kind of the token, not the
// literals of the policy text (docs/policies.md §3.1).
func TestParseErrorNamesNoLiteral(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line, col int
		problem   string
	}{
		{"string after a string", "@id(\"p\")\npermit (principal, action, resource)\nwhen { context.a == \"x\" \"LITERAL-tok-7731\" };\n",
			3, 44, `does not parse at "}": exact got <string literal> want }`},
		{"string for a comma", `@id("p") permit (principal, action, resource) when { [1, 2 "LITERAL-tok-7731"] };`,
			1, 60, `does not parse at a string literal: got <string literal> want ,`},
		{"string for an effect", `@id("p") "LITERAL-tok-7731" (principal, action, resource);`,
			1, 29, `does not parse at "(": unexpected effect: <string literal>`},
		{"duplicate record key", `@id("p") permit (principal, action, resource) when { {"LITERAL-tok-7731": 1, "LITERAL-tok-7731": 2} == {} };`,
			1, 99, `does not parse at "}": duplicate key in a record literal`}, // the closing brace
		{"integer", `@id("p") permit (principal, action, resource) when { context.a == 77317731 12 };`,
			1, 79, `does not parse at "}": exact got <integer literal> want }`},
		{"integer out of range", `@id("p") permit (principal, action, resource) when { context.a == 77317731773177317731 };`,
			1, 67, `does not parse at an integer literal: out of range`},
		{"unterminated string", `@id("p") permit (principal, action, resource) when { context.a == "LITERAL-tok-7731 };`,
			1, 67, `does not parse: literal not terminated`},
		{"end of file", `@id("p") permit (principal, action, resource) when { context.a == "LITERAL-tok-7731" `,
			1, 86, `does not parse at the end of the file: exact got the end of the file, want }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, build := range []func([]policy.File) error{
				func(f []policy.File) error { _, err := policy.New(f, declarations(t)); return err },
				func(f []policy.File) error { _, err := policy.NewReplay(f); return err },
			} {
				err := build([]policy.File{{Name: "p.cedar", Bytes: []byte(tc.src)}})
				var le *policy.LoadError
				if !errors.As(err, &le) || !errors.Is(err, policy.ErrParse) {
					t.Fatalf("got %v, want a *LoadError, ErrParse", err)
				}
				if le.Line != tc.line || le.Column != tc.col || le.Problem != tc.problem {
					t.Errorf("got %d:%d %q\nwant %d:%d %q", le.Line, le.Column, le.Problem, tc.line, tc.col, tc.problem)
				}
				for e := error(err); e != nil; e = errors.Unwrap(e) {
					if strings.Contains(e.Error(), "7731") {
						t.Errorf("the error quotes a literal: %v", e)
					}
				}
			}
		})
	}
}
