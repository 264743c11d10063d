package mcpgate

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/commit"
)

// ToolDomainSeparator prefixes the canonical tool definition in its
// digest, so that no digest made for another purpose is taken for one.
const ToolDomainSeparator = "ledger/v1/mcp-tool\n"

// ToolDigest is the digest a declaration pins: SHA-256 of
// ToolDomainSeparator and the JCS of the object
//
//	{"annotations":A, "description":D, "inputSchema":S, "name":N}
//
// where an absent description is "" and absent annotations are {}. These
// are the members an agent's model reads to choose and fill a call, so a
// change to any of them (a "rug pull") is a change a reviewer must see.
// Numbers are admitted with a fraction (a schema's "minimum": 0.5), in
// their RFC 8785 form; outside that, the strict domain applies, so a
// definition with, say, a duplicate member has no digest and its tool is
// never exposed.
func ToolDigest(t *mcp.Tool) (commit.Digest, error) {
	if t == nil || t.Name == "" {
		return commit.Digest{}, errors.New("mcpgate: tool without a name")
	}
	var annotations any = map[string]any{}
	if t.Annotations != nil {
		annotations = t.Annotations
	}
	schema := t.InputSchema
	if schema == nil {
		schema = map[string]any{}
	}
	b, err := json.Marshal(map[string]any{
		"name": t.Name, "description": t.Description, "inputSchema": schema, "annotations": annotations,
	})
	if err != nil {
		return commit.Digest{}, fmt.Errorf("mcpgate: tool definition: %w", err)
	}
	canonical, err := commit.Domain{AllowNonInteger: true}.Canonicalize(b)
	if err != nil {
		return commit.Digest{}, fmt.Errorf("mcpgate: tool definition outside the strict domain: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(ToolDomainSeparator))
	h.Write(canonical)
	var d commit.Digest
	h.Sum(d[:0])
	return d, nil
}
