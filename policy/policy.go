// Package policy loads the Cedar policy set ledgerd decides with, checks it
// against the Cedar schema generated from the action declarations, decides
// calls with it, and names it by a digest. docs/policies.md is the
// specification; this is its short form.
//
// # Directory
//
// A policy set is one directory. Every regular file whose name ends in
// ".cedar" is read, in byte order of name; a name must match
// [A-Za-z0-9][A-Za-z0-9._-]* (at most 128 bytes) and a file hold at most
// 1 MiB; a set at most MaxFiles (1024) files and MaxSetBytes (4 MiB) in
// all. A subdirectory, or a ".cedar" entry that is not a regular file
// (a symbolic link, say), is refused; other files (a README) are ignored.
// A directory with no ".cedar" file is refused.
//
// # Annotations
//
// Every policy carries @id("…"): non-empty, at most 128 bytes, passing
// entry.CheckIdentifier, unique across the set. It is the id an entry
// records. A permit may carry @approval("required"): when it is what
// allows a call, the call needs approval. @approval on a forbid, with any
// other value, and any other annotation but @description, is refused.
//
// # Validation
//
// Every policy is typechecked (cedar-go's strict validator) against
// declare.CedarSchema of the declarations: principal Agent, resource
// Tool, one action per declaration, context the minimized attributes. A
// policy naming a payload field, a derived field's raw value instead of a
// projection (context.recipient.recipient_domain, not context.recipient),
// an undeclared action, or comparing a field with the wrong type is
// refused.
//
// The validator types `context has X` on a record without X as false and
// skips what a constant cuts off (the right of `false && …`), so two
// checks come first and last. Every attribute access and has test, in
// every sub-expression, evaluated or not, must name an attribute declared
// for at least one of the policy's actions on what it is read on
// (context, a record attribute, a record literal; principal, resource,
// action and entity literals declare none), else *AttributeError. And a
// branch the validator skips for every request is made reachable and the
// policy must then validate for at least one of its actions.
//
// Errors are *LoadError values naming file:line:col and the policy id:
// of the parser's complaint, of an undeclared attribute, or else of the
// policy (the validator does not place errors inside a policy): its first
// annotation, or its effect if it has none. No error repeats a string or
// integer literal of the policy text.
//
// # Decisions
//
// Set.Decide builds the request Agent::"<principal>", Action::"<action>",
// Tool::"<action>", with the attributes as context (object → record,
// array → set, string, integer → Long, boolean; null, fractions and
// anything outside commit's strict domain refused) and no entities. A
// request the schema does not admit (an undeclared action, attributes
// not exactly the action's context) is denied unevaluated, with
// Result.Invalid set and no ids. Otherwise every policy is evaluated and
// Cedar's answer maps to one of three decisions:
//
//  1. a policy errors: deny; Errored holds the erroring ids, Determining
//     them and any matching forbid (fail closed; Cedar itself would
//     ignore an erroring policy);
//  2. a forbid matches: deny, determined by the matching forbids;
//  3. a permit marked @approval("required") matches: needs_approval,
//     determined by the matching marked permits;
//  4. a permit matches: allow, determined by the matching permits;
//  5. nothing matches: deny, determined by nothing.
//
// Ids are always sorted by byte order, unique, never nil.
//
// # Digest
//
// The policy-set digest is
//
//	SHA-256("ledger/v1/policies\n" ||
//	        for each file, in byte order of name:
//	          name || "\n" || decimal byte length || "\n" || bytes)
//
// written sha256:<lowercase hex>; the name is ASCII, the length has no
// leading zeros, nothing follows the bytes. For a.cedar holding
// `@id("allow-all")\npermit (principal, action, resource);\n` (55 bytes)
// and b.cedar holding
// `@id("no-intake")\nforbid (principal == Agent::"intake-agent", action, resource);\n`
// (80 bytes) it is
// sha256:d874143182898d75699ad5145962afb5b61f50c828d68329772f7260b51b9902.
// A new encoding gets a new domain string.
//
// # Bundle
//
// The byte string the digest hashes is the set's bundle (Bundle,
// Set.Bundle): how a set is stored, served and exported, so that
// SHA-256 of a bundle (DigestOfBundle) is its set's digest. ParseBundle
// reads one strictly (names valid and strictly increasing, lengths
// without leading zeros, nothing after the last file, the bounds above),
// so that re-encoding gives back the same bytes.
//
// # Replay
//
// NewReplay builds a set without declarations, for an auditor: it checks
// the files, the parse and the annotations as New does, but not the
// schema, and its Decide does not check the request against one.
// Evaluation does not read the schema, so for any request a validated
// set admits, the replay set's Result is the same.
package policy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/entry"
)

// DomainSeparator prefixes the encoding of the files in the policy-set
// digest.
const DomainSeparator = "ledger/v1/policies\n"

// Bounds on a policy set.
const (
	MaxFileBytes = 1 << 20
	MaxNameBytes = 128 // a file name's, a policy id's
)

// Annotations the package reads.
const (
	AnnotationID          = "id"
	AnnotationApproval    = "approval"
	AnnotationDescription = "description"
	ApprovalRequired      = "required"
)

var fileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// LoadError is why Load refused a policy set. File is the file's name in
// the directory ("" for the directory itself); Line and Column are
// 1-based, 0 when the problem is the whole file; ID is the policy's id
// when it has one. Problem never holds an attribute value.
type LoadError struct {
	File    string
	Line    int
	Column  int
	ID      string
	Problem string
	Err     error
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("policy: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
		}
		b.WriteString(": ")
	}
	if e.ID != "" {
		fmt.Fprintf(&b, "policy %q: ", e.ID)
	}
	b.WriteString(e.Problem)
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Err }

// Classifying sentinels, wrapped by LoadError.Err; test with errors.Is.
var (
	ErrParse      = errors.New("policy does not parse")
	ErrAnnotation = errors.New("policy annotation refused")
	ErrSchema     = errors.New("policy does not validate against the declarations' schema")
	ErrLayout     = errors.New("policy directory refused")
)

// File is one policy file of a set: its name in the directory and its
// exact bytes.
type File struct {
	Name  string
	Bytes []byte
}

// Policy is one loaded policy.
type Policy struct {
	ID       string
	File     string
	Line     int
	Column   int
	Forbid   bool
	Approval bool // a permit marked @approval("required")
}

// Set is a loaded policy set, validated against a schema (New, Load) or
// not (NewReplay). It is safe for concurrent use.
type Set struct {
	files     []File
	policies  []Policy // in file order, then position order
	cedar     []*cedar.Policy
	byID      map[string]int
	validator *validate.Validator // nil for a replay set
	schema    *resolved.Schema    // nil for a replay set
	payload   map[string][]string // action → its payload fields, for messages
	digest    commit.Digest
}

// Load reads the policy set in dir and validates it against the Cedar
// schema generated from decls: New over ReadDir.
func Load(dir string, decls []*declare.Declaration) (*Set, error) {
	files, err := ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return New(files, decls)
}

// ReadDir reads the files of the policy set in dir by the directory rules
// (package doc, "Directory"), refusing with the *LoadError values Load
// gives; it does not parse them. NewReplay over ReadDir is the replay set
// of a directory.
func ReadDir(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &LoadError{Problem: "cannot read the policy directory", Err: fmt.Errorf("%w: %w", ErrLayout, err)}
	}
	var files []File
	total := 0
	for _, de := range entries {
		name := de.Name()
		if de.IsDir() {
			return nil, &LoadError{File: name, Problem: "subdirectories are refused", Err: ErrLayout}
		}
		if !strings.HasSuffix(name, ".cedar") {
			continue
		}
		if !de.Type().IsRegular() {
			return nil, &LoadError{File: name, Problem: "not a regular file", Err: ErrLayout}
		}
		if len(name) > MaxNameBytes || !fileName.MatchString(name) {
			return nil, &LoadError{File: safeName(name), Problem: "file name must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most 128 bytes", Err: ErrLayout}
		}
		data, err := readFile(filepath.Join(dir, name))
		if err != nil {
			return nil, &LoadError{File: name, Problem: err.Error(), Err: fmt.Errorf("%w: %w", ErrLayout, err)}
		}
		files = append(files, File{Name: name, Bytes: data})
		total += len(data)
		if err := checkSetBounds(len(files), total); err != nil {
			return nil, err // before reading more
		}
	}
	if len(files) == 0 {
		return nil, &LoadError{Problem: "no .cedar file in the policy directory", Err: ErrLayout}
	}
	return files, nil
}

func safeName(name string) string {
	if len(name) > MaxNameBytes {
		name = name[:MaxNameBytes]
	}
	return strconv.Quote(name)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}

// New builds a policy set from files (sorted here by name; names must be
// unique and valid as in Load, and the set within MaxFiles and
// MaxSetBytes) and validates it against the Cedar schema generated from
// decls. Load is New over a directory.
func New(files []File, decls []*declare.Declaration) (*Set, error) {
	files, err := checkFiles(files)
	if err != nil {
		return nil, err
	}
	var sch schema.Schema
	if err := sch.UnmarshalCedar(declare.CedarSchema(decls...)); err != nil {
		return nil, &LoadError{Problem: "the declarations' Cedar schema does not parse", Err: fmt.Errorf("%w: %w", ErrSchema, err)}
	}
	rs, err := sch.Resolve()
	if err != nil {
		return nil, &LoadError{Problem: "the declarations' Cedar schema does not resolve", Err: fmt.Errorf("%w: %w", ErrSchema, err)}
	}
	payload := map[string][]string{}
	for _, d := range decls {
		for _, f := range d.Fields {
			if f.Tier == tier.Payload {
				payload[d.Action] = append(payload[d.Action], f.Name)
			}
		}
	}
	return newSet(files, validate.New(rs), rs, payload)
}

// checkFiles returns a sorted copy of files, with its own copy of the
// bytes, or why the files cannot make a set.
func checkFiles(files []File) ([]File, error) {
	files = slices.Clone(files)
	for i := range files {
		files[i].Bytes = slices.Clone(files[i].Bytes) // the set keeps its own copy
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	total := 0
	for i, f := range files {
		if len(f.Name) > MaxNameBytes || !fileName.MatchString(f.Name) || !strings.HasSuffix(f.Name, ".cedar") {
			return nil, &LoadError{File: safeName(f.Name), Problem: "file name must match [A-Za-z0-9][A-Za-z0-9._-]*.cedar and be at most 128 bytes", Err: ErrLayout}
		}
		if i > 0 && files[i-1].Name == f.Name {
			return nil, &LoadError{File: f.Name, Problem: "file name repeated", Err: ErrLayout}
		}
		if len(f.Bytes) > MaxFileBytes {
			return nil, &LoadError{File: f.Name, Problem: fmt.Sprintf("file larger than %d bytes", MaxFileBytes), Err: ErrLayout}
		}
		total += len(f.Bytes)
	}
	if err := checkSetBounds(len(files), total); err != nil {
		return nil, err
	}
	return files, nil
}

// newSet parses the checked files and checks each policy's annotations
// and, when v is not nil, validates it with v.
func newSet(files []File, v *validate.Validator, sch *resolved.Schema, payload map[string][]string) (*Set, error) {
	s := &Set{files: files, byID: map[string]int{}, validator: v, schema: sch, payload: payload}
	for _, f := range files {
		list, err := cedar.NewPolicyListFromBytes(f.Name, f.Bytes)
		if err != nil {
			return nil, parseError(f.Name, f.Bytes, err)
		}
		for _, p := range list {
			lp, err := s.check(f, p)
			if err != nil {
				return nil, err
			}
			s.byID[lp.ID] = len(s.policies)
			s.policies = append(s.policies, lp)
			s.cedar = append(s.cedar, p)
		}
	}
	s.digest = Digest(files)
	return s, nil
}

// cedar-go's parse errors come in three forms: the parser's
// `parse error at <input>:<line>:<col> "<token>": <message>` (the token,
// quoted as by %q, is where it stopped), the scanner's
// `<input>:<line>:<col>: <message>`, and, for a literal the scanner let
// through, a message with no position (a bad escape, an integer out of
// range). Policy text may hold a value copied from a call, and the
// parser's messages repeat tokens (`exact got "…" want }`), so a
// refusal keeps the position, the kind of the token and the message with
// every string and integer literal replaced by its kind; the cedar-go
// error itself is not kept.
var (
	parserPos    = regexp.MustCompile(`:([0-9]+):([0-9]+) ("(?:[^"\\]|\\.)*"): (.*)$`)
	scannerPos   = regexp.MustCompile(`:([0-9]+):([0-9]+): (.*)$`)
	stringToken  = regexp.MustCompile(`"(?:[^"\\]|\\.)*(?:"|$)`)
	intToken     = regexp.MustCompile(`\b[0-9]+\b`)
	duplicateKey = regexp.MustCompile(`^duplicate key: .*$`)
)

// scannerMessages are the scanner's messages, none of which quotes text.
var scannerMessages = []string{"invalid char escape", "literal not terminated", "comment not terminated", "invalid UTF-8 encoding", "invalid character NUL"}

// literalMessages are the messages without position of a literal the
// parser could not read.
var literalMessages = []string{"bad unicode rune", "bad hex escape sequence", "bad unicode escape sequence", "bad char escape"}

func parseError(file string, src []byte, err error) error {
	e := &LoadError{File: file, Problem: "does not parse", Err: ErrParse}
	msg := oneLine(err.Error())
	if m := parserPos.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Column, _ = strconv.Atoi(m[2])
		tok, _ := strconv.Unquote(m[3])
		e.Problem = fmt.Sprintf("does not parse at %s: %s", tokenKindOf(tok), redactLiterals(m[4]))
		return e
	}
	if m := scannerPos.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Column, _ = strconv.Atoi(m[2])
		if slices.Contains(scannerMessages, m[3]) {
			e.Problem = "does not parse: " + m[3]
		}
		return e
	}
	if strings.Contains(msg, "strconv.ParseInt") {
		e.Problem = "does not parse at an integer literal: out of range"
		toks := scan(src)
		for i, t := range toks {
			negated := i > 0 && toks[i-1].text == "-"
			if _, err := strconv.ParseInt(t.text, 10, 64); t.kind == tokInt && err != nil && (t.text != "9223372036854775808" || !negated) {
				e.Line, e.Column = t.line, t.col
				break
			}
		}
		return e
	}
	for _, lm := range literalMessages {
		if strings.HasSuffix(msg, lm) {
			e.Problem = "does not parse: a string literal: " + lm
		}
	}
	return e
}

// tokenKindOf describes the token the parser stopped at without repeating
// a literal.
func tokenKindOf(tok string) string {
	switch {
	case tok == "":
		return "the end of the file"
	case tok[0] == '"':
		return "a string literal"
	case '0' <= tok[0] && tok[0] <= '9':
		return "an integer literal"
	}
	return strconv.Quote(safeIdent(tok))
}

// redactLiterals replaces the string and integer literals a parser
// message repeats by their kind.
func redactLiterals(msg string) string {
	if duplicateKey.MatchString(msg) { // the key is a literal's value
		return "duplicate key in a record literal"
	}
	msg = strings.Replace(msg, "got  want", "got the end of the file, want", 1)
	msg = stringToken.ReplaceAllLiteralString(msg, "<string literal>")
	return intToken.ReplaceAllLiteralString(msg, "<integer literal>")
}

func (s *Set) check(f File, p *cedar.Policy) (Policy, error) {
	file := f.Name
	pos := p.Position()
	lp := Policy{File: file, Line: pos.Line, Column: pos.Column, Forbid: p.Effect() == cedar.Forbid}
	fail := func(sentinel error, format string, args ...any) error {
		return &LoadError{File: file, Line: pos.Line, Column: pos.Column, ID: lp.ID, Problem: fmt.Sprintf(format, args...), Err: sentinel}
	}
	ann := p.Annotations()
	id, ok := ann[AnnotationID]
	if !ok {
		return lp, fail(ErrAnnotation, "no @id annotation")
	}
	if err := checkID(string(id)); err != nil {
		return lp, fail(ErrAnnotation, "@id refused: %v", err)
	}
	lp.ID = string(id)
	if i, dup := s.byID[lp.ID]; dup {
		first := s.policies[i]
		return lp, fail(ErrAnnotation, "@id repeated (first at %s:%d:%d)", first.File, first.Line, first.Column)
	}
	values := make(map[string]string, len(ann))
	for k, v := range ann {
		values[string(k)] = string(v)
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		switch k {
		case AnnotationID, AnnotationDescription:
		case AnnotationApproval:
			if lp.Forbid {
				return lp, fail(ErrAnnotation, "@approval on a forbid")
			}
			if values[k] != ApprovalRequired {
				return lp, fail(ErrAnnotation, "@approval must be %q", ApprovalRequired)
			}
			lp.Approval = true
		default:
			return lp, fail(ErrAnnotation, "unknown annotation @%s (only @id, @approval and @description)", safeIdent(k))
		}
	}
	if s.validator == nil { // a replay set: no schema
		return lp, nil
	}
	ast := (*xast.Policy)(p.AST())
	if refusals := checkAttributes(s.schema, s.payload, ast); len(refusals) > 0 {
		r, line, col := locate(f.Bytes, pos.Offset, refusals)
		if line == 0 {
			line, col = pos.Line, pos.Column
		}
		return lp, &LoadError{File: file, Line: line, Column: col, ID: lp.ID, Problem: "names an undeclared attribute: " + r.err.Error(), Err: fmt.Errorf("%w: %w", ErrSchema, r.err)}
	}
	if err := s.validator.Policy(lp.ID, ast); err != nil {
		msg := validatorMessage(lp.ID, err)
		return lp, fail(fmt.Errorf("%w: %s", ErrSchema, msg), "does not validate: %s", msg)
	}
	if err := checkUnreached(s.validator, s.schema, lp.ID, ast); err != nil {
		return lp, fail(fmt.Errorf("%w: %w", ErrSchema, err), "does not validate in a branch no request evaluates (after a condition always false or always true: false && …, true || …, if false then …): %s", err)
	}
	return lp, nil
}

// validatorString is a string literal as cedar-go's validator quotes it
// (`"…"`, in back quotes, as in failed to parse as IP address: `"…"`),
// not an entity uid (`Agent::"…"`, which it names as the policy does).
var validatorString = regexp.MustCompile("`\"(?:[^\"\\\\]|\\\\.)*\"`")

// validatorMessage is the validator's complaint about policy id on one
// line, without the policy's name and with the string literals it quotes
// replaced by their kind.
func validatorMessage(id string, err error) string {
	msg := strings.ReplaceAll(oneLine(err.Error()), "for policy `"+id+"`, ", "")
	return validatorString.ReplaceAllLiteralString(msg, "`<string literal>`")
}

// locate returns the refusal that comes first in the text of the policy
// starting at byte offset start of src, and the line and column of its
// attribute; 0, 0 and the first refusal when the text does not show where
// it is.
func locate(src []byte, start int, refusals []attrRefusal) (attrRefusal, int, int) {
	toks := scan(src)
	from := slices.IndexFunc(toks, func(t token) bool { return t.offset >= start })
	if from < 0 {
		return refusals[0], 0, 0
	}
	toks = toks[from:]
	if end := slices.IndexFunc(toks, func(t token) bool { return t.text == ";" }); end >= 0 {
		toks = toks[:end]
	}
	attrs := attrTokens(toks)
	best, bestAt := refusals[0], -1
	for _, r := range refusals {
		at := slices.IndexFunc(attrs, func(a attrToken) bool {
			return a.name == r.name && r.receiver != nil && slices.Equal(a.receiver, r.receiver)
		})
		if at < 0 {
			at = slices.IndexFunc(attrs, func(a attrToken) bool { return a.name == r.name })
		}
		if at >= 0 && (bestAt < 0 || attrs[at].offset < attrs[bestAt].offset) {
			best, bestAt = r, at
		}
	}
	if bestAt < 0 {
		return best, 0, 0
	}
	return best, attrs[bestAt].line, attrs[bestAt].col
}

func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > MaxNameBytes:
		return fmt.Errorf("longer than %d bytes", MaxNameBytes)
	}
	return entry.CheckIdentifier(id)
}

func safeIdent(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// Files returns the set's files, sorted by name: what its digest covers
// and what a replay needs. The caller must not modify the bytes.
func (s *Set) Files() []File { return slices.Clone(s.files) }

// Policies returns the set's policies in file order, then source order.
func (s *Set) Policies() []Policy { return slices.Clone(s.policies) }

// Digest returns the policy-set digest.
func (s *Set) Digest() commit.Digest { return s.digest }

// Digest computes the policy-set digest of files, which it sorts by name:
// SHA-256 of DomainSeparator followed, per file, by its name, "\n", its
// byte length in decimal, "\n" and its bytes.
func Digest(files []File) commit.Digest {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	io.WriteString(h, DomainSeparator)
	for _, f := range files {
		io.WriteString(h, f.Name)
		io.WriteString(h, "\n")
		io.WriteString(h, strconv.Itoa(len(f.Bytes)))
		io.WriteString(h, "\n")
		h.Write(f.Bytes)
	}
	var d commit.Digest
	h.Sum(d[:0])
	return d
}
