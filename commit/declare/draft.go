package declare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/tier"
)

// Skipped is an argument of a tool's inputSchema that a draft does not
// declare, and why. The argument is then unclassified: it reaches only
// the parameter digest, as a payload field would. Name is the property's
// name as the upstream server wrote it (declaration text, not a call's
// value; escape it before printing it to a terminal).
type Skipped struct {
	Name   string
	Reason string
}

// MaxInputSchemaBytes bounds the inputSchema DraftFromInputSchema reads.
const MaxInputSchemaBytes = 1 << 20

// DraftFromInputSchema writes the draft declaration of an MCP tool from
// its inputSchema (a JSON Schema object: "properties", "required"), for a
// person to review: the action server + "." + toolName, the tool pin
// (server, toolName, definitionDigest), "reviewed": false, and one field
// per property whose name is a field name (IsFieldName), every one of
// tier payload, so that the draft lets nothing cross until a reviewer
// raises a field. A property's type is mapped by its "type" keyword:
//
//	"string"                          → string
//	"integer"                         → integer
//	"boolean"                         → boolean
//	"array" with items {"type":"string"} → string_list
//	anything else ("number", "object", a list of types, none, "$ref") → json
//
// A property not listed in "required" is optional; its "description", if
// a string, is the field's description. Descriptions are put in NFC (the
// strict domain admits no other form); one holding a code point whose
// normalization depends on the Unicode version (commit.NormalizationStable)
// is left out, since the domain refuses it in any form. A property whose name the field
// rule refuses is reported in the Skipped list, in name order, not
// declared; so are properties past MaxFields. A tool without properties
// gets "fields": {}.
//
// The draft is indented JSON with its members in a fixed order
// (declaration, action, reviewed, description, tool, fields; fields and
// their members in byte order) and parses with Parse. It refuses, with an
// *Error: a server or tool name that cannot name an action (a tool whose
// name is not an action part, IsActionPart, is not declarable and the
// gateway reports it), a zero definition digest, and an inputSchema that
// is not a JSON object with an object "properties" (or none), a list of
// strings "required" (or none), no repeated member name, "type" "object"
// if present, at most MaxInputSchemaBytes. The Pointer of such an *Error
// is into the inputSchema ("/properties") or names the tool pin member
// ("/tool/name"), never a value.
func DraftFromInputSchema(server, toolName, description string, inputSchema []byte, definitionDigest commit.Digest) ([]byte, []Skipped, error) {
	fail := func(pointer, format string, args ...any) error {
		return &Error{Pointer: pointer, Code: CodeDraftRefused, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case !IsActionPart(server):
		return nil, nil, fail("/tool/server", "not ASCII letters, digits, '_' and '-', starting with a letter (at most %d bytes)", MaxNameBytes)
	case toolName == "" || len(toolName) > MaxToolNameBytes || strings.ContainsFunc(toolName, unicode.IsControl) || !IsActionPart(toolName):
		return nil, nil, fail("/tool/name", "a tool whose name is not ASCII letters, digits, '_' and '-', starting with a letter (at most %d bytes), cannot be declared", MaxNameBytes)
	case !IsActionName(server + "." + toolName):
		return nil, nil, fail("/action", "the server and tool names make an action name longer than %d bytes", MaxNameBytes)
	case definitionDigest == (commit.Digest{}):
		return nil, nil, fail("/tool/definition_digest", "all zeros")
	}
	action := server + "." + toolName
	fail = func(pointer, format string, args ...any) error {
		return &Error{Action: action, Pointer: pointer, Code: CodeDraftRefused, Problem: "inputSchema: " + fmt.Sprintf(format, args...)}
	}
	if len(inputSchema) > MaxInputSchemaBytes {
		return nil, nil, fail("", "more than %d bytes", MaxInputSchemaBytes)
	}
	if err := checkNoDuplicates(inputSchema); err != nil {
		return nil, nil, fail("", "%v", err)
	}
	var schema map[string]any
	dec := json.NewDecoder(bytes.NewReader(inputSchema))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil || schema == nil {
		return nil, nil, fail("", "not a JSON object")
	}
	if t, ok := schema["type"]; ok && t != "object" {
		return nil, nil, fail("/type", `not "object"`)
	}
	props := map[string]any{}
	if p, ok := schema["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return nil, nil, fail("/properties", "not an object")
		}
	}
	required := map[string]bool{}
	if r, ok := schema["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return nil, nil, fail("/required", "not a list of names")
		}
		for i, n := range list {
			name, ok := n.(string)
			if !ok {
				return nil, nil, fail(fmt.Sprintf("/required/%d", i), "not a string")
			}
			required[name] = true
		}
	}

	type draftField struct {
		Type        Type      `json:"type"`
		Tier        tier.Tier `json:"tier"`
		Optional    bool      `json:"optional,omitempty"`
		Description string    `json:"description,omitempty"`
	}
	fields := map[string]draftField{}
	var skipped []Skipped
	for _, name := range slices.Sorted(maps.Keys(props)) {
		switch {
		case !IsFieldName(name):
			skipped = append(skipped, Skipped{name, fmt.Sprintf("not a field name (ASCII letters, digits and '_', starting with a letter, at most %d bytes): undeclared, it reaches only the parameter digest", MaxNameBytes)})
			continue
		case len(fields) == MaxFields:
			skipped = append(skipped, Skipped{name, fmt.Sprintf("past the %d fields a declaration may have: undeclared, it reaches only the parameter digest", MaxFields)})
			continue
		}
		f := draftField{Type: draftType(props[name]), Tier: tier.Payload, Optional: !required[name]}
		if p, ok := props[name].(map[string]any); ok {
			if d, ok := p["description"].(string); ok {
				f.Description = draftText(d)
			}
		}
		fields[name] = f
	}

	type draftTool struct {
		Server           string `json:"server"`
		Name             string `json:"name"`
		DefinitionDigest string `json:"definition_digest"`
	}
	draft := struct {
		Declaration int                   `json:"declaration"`
		Action      string                `json:"action"`
		Reviewed    bool                  `json:"reviewed"`
		Description string                `json:"description,omitempty"`
		Tool        draftTool             `json:"tool"`
		Fields      map[string]draftField `json:"fields"`
	}{Version, action, false, draftText(description), draftTool{server, toolName, definitionDigest.String()}, fields}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(draft); err != nil {
		return nil, nil, &Error{Action: action, Code: CodeInternal, Problem: "the draft does not encode", Err: err}
	}
	if _, err := Parse(b.Bytes()); err != nil {
		// Not reached: every name and member was checked above.
		return nil, nil, &Error{Action: action, Code: CodeInternal, Problem: "the draft does not parse", Err: err}
	}
	return b.Bytes(), skipped, nil
}

// draftType maps a property's JSON Schema to a field type.
func draftType(s any) Type {
	p, ok := s.(map[string]any)
	if !ok || p["$ref"] != nil {
		return JSON // a boolean schema; a $ref, which in draft-07 overrides its siblings
	}
	switch p["type"] {
	case "string":
		return String
	case "integer":
		return Integer
	case "boolean":
		return Boolean
	case "array":
		items, ok := p["items"].(map[string]any)
		if ok && items["type"] == "string" && items["$ref"] == nil && p["prefixItems"] == nil {
			return StringList
		}
	}
	return JSON
}

// checkNoDuplicates refuses what is not one JSON value, and JSON with an
// object that repeats a member name: encoding/json would keep the last silently, where another reader
// of the same schema may keep the first.
func checkNoDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		names  map[string]bool
		object bool
		key    bool // the next token of an object is a member name
	}
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF) && len(stack) == 0:
			return nil
		case err != nil:
			return errors.New("not JSON")
		case len(stack) == 0:
			if values++; values > 1 {
				return errors.New("not one JSON value")
			}
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name := tok.(string) // the decoder yields only names here
			if top.names[name] {
				return errors.New("an object repeats a member name")
			}
			top.names[name] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true // this token is a value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// draftText is a description as a draft holds it: in NFC, or left out when
// the strict domain would refuse it whatever its form.
func draftText(s string) string {
	if !commit.NormalizationStable(s) {
		return ""
	}
	return norm.NFC.String(s)
}
