package mcpgate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resources, prompts and completions are reads the agent's host makes,
// not acts of the agent's: a server's are passed through, unrecorded,
// only when its config lists them in forward. Prompt names are
// namespaced as tools are ("server.prompt"); resource URIs are global
// names and keep theirs, the first server to list one owning it.

// forwarding is what the gateway passes through for its upstreams.
type forwarding struct {
	mu        sync.Mutex
	resources map[string]*upstream // by URI
	templates map[string]*upstream // by URI template
	prompts   map[string]*upstream // by namespaced name
}

func (u *upstream) forwards(what string) bool { return slices.Contains(u.cfg.Forward, what) }

// anyForwards says whether some server forwards what.
func anyForwards(cfg *Config, what string) bool {
	for _, s := range cfg.Servers {
		if slices.Contains(s.Forward, what) {
			return true
		}
	}
	return false
}

// serverOptions adds the handlers forwarding needs to the agents' server.
func (g *Gateway) serverOptions(o *mcp.ServerOptions) {
	caps := o.Capabilities
	// logging/setLevel is answered by the SDK; the gateway sends no log
	// messages to agents (they could hold values). Deprecated in
	// 2026-07-28, but clients of earlier versions set a level.
	//lint:ignore SA1019 kept for clients of versions before 2026-07-28
	caps.Logging = &mcp.LoggingCapabilities{}
	if anyForwards(g.cfg, "resources") {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true}
		o.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			s, err := g.resourceSession(ctx, req.Params.URI)
			if err != nil {
				return err
			}
			return s.Subscribe(ctx, req.Params)
		}
		o.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			s, err := g.resourceSession(ctx, req.Params.URI)
			if err != nil {
				return err
			}
			return s.Unsubscribe(ctx, req.Params)
		}
	}
	if anyForwards(g.cfg, "prompts") {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if anyForwards(g.cfg, "completions") {
		caps.Completions = &mcp.CompletionCapabilities{}
		o.CompletionHandler = g.complete
	}
}

// resourceSession is the session of the server owning uri.
func (g *Gateway) resourceSession(ctx context.Context, uri string) (*mcp.ClientSession, error) {
	u := g.resourceOwner(uri)
	if u == nil {
		return nil, errors.New("no such resource")
	}
	return u.connected(ctx)
}

func (g *Gateway) resourceOwner(uri string) *upstream {
	g.fwd.mu.Lock()
	defer g.fwd.mu.Unlock()
	if u := g.fwd.resources[uri]; u != nil {
		return u
	}
	for tmpl, u := range g.fwd.templates {
		if prefix, _, ok := strings.Cut(tmpl, "{"); ok && strings.HasPrefix(uri, prefix) {
			return u
		}
	}
	// A URI no server listed (a subscription made before the resource
	// exists, say) goes to the one server forwarding resources, if there
	// is only one; with several, nobody can tell whose it is.
	var only *upstream
	for _, u := range g.upstreams {
		if u.forwards("resources") {
			if only != nil {
				return nil
			}
			only = u
		}
	}
	return only
}

// syncForwarded lists what up forwards and puts it on the agents' server.
func (g *Gateway) syncForwarded(ctx context.Context, up *upstream) {
	s, err := up.connected(ctx)
	if err != nil {
		return
	}
	if up.forwards("resources") {
		var rs []*mcp.Resource
		for r, err := range s.Resources(ctx, nil) {
			if err != nil {
				break
			}
			rs = append(rs, r)
		}
		var ts []*mcp.ResourceTemplate
		for tmpl, err := range s.ResourceTemplates(ctx, nil) {
			if err != nil {
				break
			}
			ts = append(ts, tmpl)
		}
		g.fwd.mu.Lock()
		for _, r := range rs {
			if owner := g.fwd.resources[r.URI]; owner != nil && owner != up {
				continue
			}
			g.fwd.resources[r.URI] = up
			g.server.AddResource(r, up.readResource)
		}
		for _, tmpl := range ts {
			if owner := g.fwd.templates[tmpl.URITemplate]; owner != nil && owner != up {
				continue
			}
			g.fwd.templates[tmpl.URITemplate] = up
			g.server.AddResourceTemplate(tmpl, up.readResource)
		}
		g.fwd.mu.Unlock()
	}
	if up.forwards("prompts") {
		var ps []*mcp.Prompt
		for p, err := range s.Prompts(ctx, nil) {
			if err != nil {
				break
			}
			ps = append(ps, p)
		}
		g.fwd.mu.Lock()
		for _, p := range ps {
			name := up.name + "." + p.Name
			g.fwd.prompts[name] = up
			agentPrompt := *p
			agentPrompt.Name = name
			own := p.Name
			g.server.AddPrompt(&agentPrompt, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				s, err := up.connected(ctx)
				if err != nil {
					return nil, err
				}
				params := *req.Params
				params.Name = own
				return s.GetPrompt(ctx, &params)
			})
		}
		g.fwd.mu.Unlock()
	}
}

func (u *upstream) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	s, err := u.connected(ctx)
	if err != nil {
		return nil, err
	}
	return s.ReadResource(ctx, req.Params)
}

// complete forwards a completion to the server owning its reference.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := req.Params.Ref
	if ref == nil {
		return nil, errors.New("no reference")
	}
	params := *req.Params
	var u *upstream
	switch ref.Type {
	case "ref/prompt":
		g.fwd.mu.Lock()
		u = g.fwd.prompts[ref.Name]
		g.fwd.mu.Unlock()
		if u != nil {
			r := *ref
			r.Name = strings.TrimPrefix(ref.Name, u.name+".")
			params.Ref = &r
		}
	case "ref/resource":
		u = g.resourceOwner(ref.URI)
	}
	if u == nil || !u.forwards("completions") {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	s, err := u.connected(ctx)
	if err != nil {
		return nil, err
	}
	return s.Complete(ctx, &params)
}
