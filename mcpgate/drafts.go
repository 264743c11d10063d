package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/commit/declare"
)

// WriteDrafts lists server's tools and writes, into dir, a draft
// declaration per tool (declare.DraftFromInputSchema): every field
// payload, pinned to the definition listed now, "reviewed": false. It
// never overwrites a file: a tool already declared there is left alone,
// so that a reviewed declaration is never replaced by a draft. It returns
// one line per tool saying what was done, arguments that cannot be
// declared included.
func (g *Gateway) WriteDrafts(ctx context.Context, server, dir string) ([]string, error) {
	up, ok := g.upstreams[server]
	if !ok {
		return nil, fmt.Errorf("no server %q in the config", server)
	}
	tools, err := up.listTools(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lines []string
	var errs []error
	for _, t := range tools {
		name := server + "." + t.Name
		digest, err := ToolDigest(t)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: not declarable: its definition is outside the strict JSON domain", name))
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: input schema: %w", name, err))
			continue
		}
		draft, skipped, err := declare.DraftFromInputSchema(server, t.Name, t.Description, schema, digest)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: not declarable: %v", name, err))
			continue
		}
		path := filepath.Join(dir, name+".json")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			lines = append(lines, fmt.Sprintf("%s: %s exists; left as it is", name, path))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = f.Write(draft)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		line := fmt.Sprintf("%s: draft written to %s (unreviewed, pinned to %s)", name, path, digest)
		for _, s := range skipped {
			line += fmt.Sprintf("; argument %q not declarable (%s): it is treated as payload", s.Name, s.Reason)
		}
		lines = append(lines, line)
	}
	return lines, errors.Join(errs...)
}
