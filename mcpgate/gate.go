package mcpgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

// Version is the gateway's implementation version, sent to both sides.
const Version = "0.1.0"

// Gateway mediates the tool calls of the agents connected to its Server:
// each one is checked, minimized, decided by the ledger and recorded
// before it is forwarded, or refused.
type Gateway struct {
	cfg         *Config
	log         *slog.Logger
	ledger      *client.Client
	decls       map[string]*declare.Declaration // by action (namespaced tool)
	declDigests map[string]commit.Digest
	allowlists  map[string]map[string]bool
	callTimeout time.Duration
	refresh     time.Duration
	server      *mcp.Server
	upstreams   map[string]*upstream
	approvals   *approvals
	disclosures *disclosureStore // nil: none kept (or version 1)
	metrics     *Metrics
	fwd         forwarding
	outcomes    *outcomes

	mu       sync.Mutex
	tools    map[string]*gatedTool // what the upstreams offer, by namespaced name
	draining bool                  // Drain was called: no new calls
	calls    sync.WaitGroup        // calls being handled
}

// enter admits a call unless the gateway is draining.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.calls.Add(1)
	return true
}

// Drain refuses new calls and waits, up to timeout, for those being
// handled to finish (and so to queue their outcomes). It reports whether
// they all did.
func (g *Gateway) Drain(timeout time.Duration) bool {
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.calls.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// gatedTool is one upstream tool as last listed, and whether it is
// exposed: declared, reviewed, and its definition matching the pin.
type gatedTool struct {
	up       *upstream
	def      *mcp.Tool // the upstream's definition, its own name
	digest   commit.Digest
	decl     *declare.Declaration
	status   ToolStatus
	exposed  bool
	problems string // for the log: why it is not exposed
}

// ToolStatus is what the gateway makes of one upstream tool.
type ToolStatus string

const (
	// Exposed tools are listed to agents and gated.
	Exposed ToolStatus = "exposed"
	// Undeclared tools have no declaration: hidden, refused.
	Undeclared ToolStatus = "undeclared"
	// Unreviewed tools have a draft declaration nobody has reviewed yet.
	Unreviewed ToolStatus = "unreviewed"
	// PinMismatch tools changed definition since their declaration was
	// reviewed (a "rug pull", or an upgrade to review): hidden, refused.
	PinMismatch ToolStatus = "pin_mismatch"
	// Unpinned tools have a declaration without a tool pin.
	Unpinned ToolStatus = "unpinned"
	// NoDigest tools have a definition outside the strict domain.
	NoDigest ToolStatus = "no_digest"
)

// Options are what New needs besides the config.
type Options struct {
	Logger *slog.Logger // default: discard
	// Ledger overrides the client made from the config (tests).
	Ledger *client.Client
}

// New reads the declarations and the ledger credential. It connects to
// nothing: Start does.
func New(cfg *Config, opts Options) (*Gateway, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, log: log, upstreams: map[string]*upstream{}, tools: map[string]*gatedTool{},
		metrics: newMetrics(), fwd: forwarding{resources: map[string]*upstream{}, templates: map[string]*upstream{}, prompts: map[string]*upstream{}}}
	var err error
	if g.callTimeout, err = cfg.callTimeout(); err != nil {
		return nil, err
	}
	if g.refresh, err = cfg.refreshInterval(); err != nil {
		return nil, err
	}
	if g.decls, g.declDigests, err = readDeclarations(cfg.Path(cfg.DeclarationsDir)); err != nil {
		return nil, err
	}
	g.allowlists = map[string]map[string]bool{}
	for name, list := range cfg.Allowlists {
		m := make(map[string]bool, len(list))
		for _, v := range list {
			m[v] = true
		}
		g.allowlists[name] = m
	}
	g.ledger = opts.Ledger
	if g.ledger == nil {
		token, err := readSecret("ledger.token_file", cfg.Path(cfg.Ledger.TokenFile))
		if err != nil {
			return nil, err
		}
		if g.ledger, err = client.New(cfg.Ledger.URL, string(token), cfg.Ledger.VerifierKey); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		g.ledger.HTTP = &http.Client{Transport: keepAliveTransport()}
	}
	if g.approvals, err = newApprovals(cfg); err != nil {
		return nil, err
	}
	if dir := cfg.DisclosureDir(); cfg.Hiding() && dir != "" {
		if g.disclosures, err = openDisclosureStore(dir); err != nil {
			return nil, err
		}
	}
	for name, sc := range cfg.Servers {
		g.upstreams[name] = &upstream{name: name, cfg: sc, gw: g, http: keepAliveTransport()}
	}
	sopts := &mcp.ServerOptions{
		Logger: discardSDKLog,
		// Tools are announced even before an upstream lists one, so that
		// agents watch for list changes.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	}
	g.serverOptions(sopts)
	g.server = mcp.NewServer(&mcp.Implementation{Name: "ledger-mcp", Version: Version}, sopts)
	g.server.AddReceivingMiddleware(g.listToolsRefresh)
	g.outcomes = newOutcomes(g)
	return g, nil
}

// discardSDKLog keeps the SDK's own log quiet: its messages can quote
// request contents.
var discardSDKLog = slog.New(slog.DiscardHandler)

// readDeclarations reads every *.json file of dir.
func readDeclarations(dir string) (map[string]*declare.Declaration, map[string]commit.Digest, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("declarations_dir: %w", err)
	}
	sort.Strings(paths)
	decls := map[string]*declare.Declaration{}
	digests := map[string]commit.Digest{}
	from := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		d, err := declare.Parse(b)
		if err != nil {
			return nil, nil, fmt.Errorf("declarations_dir: %s: %w", filepath.Base(p), err)
		}
		if other, dup := from[d.Action]; dup {
			return nil, nil, fmt.Errorf("declarations_dir: %s and %s both declare %s", other, filepath.Base(p), d.Action)
		}
		dg, err := d.Digest()
		if err != nil {
			return nil, nil, fmt.Errorf("declarations_dir: %s: %w", filepath.Base(p), err)
		}
		from[d.Action] = filepath.Base(p)
		decls[d.Action] = d
		digests[d.Action] = dg
	}
	return decls, digests, nil
}

// Server is the MCP server agents connect to.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Metrics are the gateway's counters.
func (g *Gateway) Metrics() *Metrics { return g.metrics }

// Start connects to every upstream and lists its tools. An upstream that
// cannot be reached is logged and retried at each refresh; its tools stay
// hidden meanwhile. Start returns once every upstream was tried; the
// refreshes run until ctx ends.
func (g *Gateway) Start(ctx context.Context) {
	g.SyncAll(ctx)
	go func() {
		t := time.NewTicker(g.refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.SyncAll(ctx)
			}
		}
	}()
}

// SyncAll reads every upstream's tools again.
func (g *Gateway) SyncAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, up := range g.upstreams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.sync(ctx, up)
		}()
	}
	wg.Wait()
}

// FlushOutcomes waits until every outcome queued so far is recorded (or
// given up and logged).
func (g *Gateway) FlushOutcomes() { g.outcomes.Flush() }

// Close records the outcomes still queued (up to 30 s), then ends the
// upstream sessions.
func (g *Gateway) Close() error {
	g.outcomes.close()
	var errs []error
	for _, up := range g.upstreams {
		errs = append(errs, up.close())
	}
	return errors.Join(errs...)
}

// listToolsRefresh reads the upstreams' tools again before answering an
// agent's tools/list, so that a definition changed upstream is caught
// before the agent sees a list.
func (g *Gateway) listToolsRefresh(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			g.syncFresh(ctx)
		case "tools/call":
			// A tool that is not exposed gets a tool error naming why,
			// as every refusal does, rather than the SDK's protocol error.
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				if gt, status := g.lookup(p.Name); gt == nil {
					return g.refuseUnexposed(p.Name, status), nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

// freshFor is how long a listing of an upstream's tools stands in for a
// new one when an agent lists tools: agents may list often, and a burst
// of them should not become a burst on every upstream. Notifications
// and the periodic refresh always list again.
const freshFor = time.Second

// syncFresh lists again the tools of every upstream not listed within
// freshFor.
func (g *Gateway) syncFresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, up := range g.upstreams {
		up.mu.Lock()
		stale := time.Since(up.listed) >= freshFor
		up.mu.Unlock()
		if !stale {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.sync(ctx, up)
		}()
	}
	wg.Wait()
}

// sync lists up's tools and exposes exactly those that are declared,
// reviewed and pinned to their current definition. One listing of an
// upstream runs at a time.
func (g *Gateway) sync(ctx context.Context, up *upstream) {
	up.syncMu.Lock()
	defer up.syncMu.Unlock()
	defer func() {
		up.mu.Lock()
		up.listed = time.Now()
		up.mu.Unlock()
	}()
	defs, err := up.listTools(ctx)
	if err != nil {
		g.log.Warn("upstream unavailable; its tools are hidden", "server", up.name, "err", err)
		g.replaceTools(up, nil)
		return
	}
	g.replaceTools(up, defs)
	g.syncForwarded(ctx, up)
}

// replaceTools makes defs the tools of up, adding and removing tools on
// the agents' server as their status says.
func (g *Gateway) replaceTools(up *upstream, defs []*mcp.Tool) {
	next := map[string]*gatedTool{}
	for _, def := range defs {
		name := up.name + "." + def.Name
		gt := &gatedTool{up: up, def: def, decl: g.decls[name]}
		gt.status, gt.problems = g.judge(name, gt)
		gt.exposed = gt.status == Exposed
		next[name] = gt
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var remove []string
	for name, old := range g.tools {
		if old.up != up {
			continue
		}
		if n, ok := next[name]; !ok || !n.exposed {
			if old.exposed {
				remove = append(remove, name)
			}
		}
		if _, ok := next[name]; !ok {
			delete(g.tools, name)
		}
	}
	for name, gt := range next {
		old := g.tools[name]
		g.tools[name] = gt
		if old == nil || old.status != gt.status || old.digest != gt.digest {
			g.report(name, gt)
		}
		if gt.exposed && (old == nil || !old.exposed || old.digest != gt.digest) {
			g.server.AddTool(g.agentTool(name, gt.def), g.handler(name))
		}
	}
	if len(remove) > 0 {
		g.server.RemoveTools(remove...)
	}
}

// judge decides whether a listed tool is exposed.
func (g *Gateway) judge(name string, gt *gatedTool) (ToolStatus, string) {
	d, err := ToolDigest(gt.def)
	if err != nil {
		return NoDigest, err.Error()
	}
	gt.digest = d
	if gt.decl == nil {
		return Undeclared, "no declaration names it"
	}
	switch pin := gt.decl.Tool; {
	case !gt.decl.Reviewed():
		return Unreviewed, "its declaration is a draft nobody has reviewed"
	case pin == nil:
		return Unpinned, "its declaration has no tool pin"
	case pin.Server != gt.up.name || pin.Name != gt.def.Name:
		return PinMismatch, "its declaration pins another tool"
	case pin.DefinitionDigest != d:
		return PinMismatch, "its definition changed since its declaration was reviewed"
	}
	return Exposed, ""
}

// report logs a tool's status when it changes.
func (g *Gateway) report(name string, gt *gatedTool) {
	switch gt.status {
	case Exposed:
		g.log.Info("tool exposed", "tool", name, "definition_digest", gt.digest.String())
	case PinMismatch:
		g.metrics.add(g.metrics.pinMismatch, name)
		g.log.Warn("tool hidden: definition does not match its pin; review its declaration again",
			"tool", name, "definition_digest", gt.digest.String(), "problem", gt.problems)
	case Undeclared:
		g.log.Info("tool hidden", "tool", name, "status", string(gt.status), "problem", gt.problems)
	default:
		g.log.Warn("tool hidden", "tool", name, "status", string(gt.status), "problem", gt.problems)
	}
}

// agentTool is the definition agents see: the upstream's, renamed.
func (g *Gateway) agentTool(name string, def *mcp.Tool) *mcp.Tool {
	t := *def
	t.Name = name
	t.Meta = nil
	if t.InputSchema == nil {
		t.InputSchema = map[string]any{"type": "object"}
	}
	return &t
}

// ToolReport is one upstream tool's status, for "ledger-mcp check".
type ToolReport struct {
	Name             string     `json:"name"`
	Status           ToolStatus `json:"status"`
	DefinitionDigest string     `json:"definition_digest,omitempty"`
	Problem          string     `json:"problem,omitempty"`
}

// Tools reports every tool the upstreams offer, by name.
func (g *Gateway) Tools() []ToolReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]ToolReport, 0, len(g.tools))
	for name, gt := range g.tools {
		r := ToolReport{Name: name, Status: gt.status, Problem: gt.problems}
		if gt.digest != (commit.Digest{}) {
			r.DefinitionDigest = gt.digest.String()
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b ToolReport) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// lookup returns the tool an agent calls if it is exposed now.
func (g *Gateway) lookup(name string) (*gatedTool, ToolStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt, ok := g.tools[name]
	if !ok {
		return nil, Undeclared
	}
	if !gt.exposed {
		return nil, gt.status
	}
	return gt, Exposed
}

// keepAliveTransport is the HTTP transport to ledgerd and to each
// upstream server: http.DefaultTransport's, keeping up to 64 idle
// connections to a host instead of 2. With the default, every call in
// flight beyond the second (and each outcome recorded meanwhile) opened
// a connection and closed it after its answer (docs/performance.md "MCP
// gateway").
func keepAliveTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// randomKey is a fresh idempotency key.
func randomKey(prefix string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// refusal is a tool error result: what an agent is told when its call
// is not forwarded. Its text never holds an argument value.
func refusal(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// resultOf is the outcome recorded for what an upstream answered.
func resultOf(res *mcp.CallToolResult, err error) entry.Result {
	switch {
	case err != nil:
		return entry.Unknown
	case res.IsError:
		return entry.Failed
	}
	return entry.Succeeded
}

// rawArguments is the call's arguments as received: an absent or null
// member is the empty object.
func rawArguments(p *mcp.CallToolParamsRaw) []byte {
	if p == nil || len(p.Arguments) == 0 || string(p.Arguments) == "null" {
		return []byte("{}")
	}
	return p.Arguments
}
