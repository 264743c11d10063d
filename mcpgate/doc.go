// Package mcpgate is an MCP gateway: the workload and mediator side of
// the decision ledger for agents that act through MCP tools. It is the
// MCP server agents connect to (over stdio or streamable HTTP) and an MCP
// client of the upstream servers that hold the tools (a command or an
// HTTP URL each). It holds the raw arguments; ledgerd never sees them.
// docs/mcp.md is the full reference; in short:
//
//   - Tools are namespaced by server, "server.tool", and exposed only
//     when a declaration (commit/declare) names that action, is reviewed
//     (no "reviewed": false) and pins the tool's current definition:
//     ToolDigest of its name, description, input schema and annotations.
//     A tool whose definition no longer matches (a "rug pull") is hidden
//     and every call to it refused, with a log line and a metric, until
//     its declaration is reviewed again. The upstreams' lists are read at
//     start, on their list_changed notifications, before every tools/list
//     an agent sends, and every refresh_interval.
//   - Every tools/call: the arguments as received are checked against the
//     strict JSON domain and committed to (the parameter digest: by
//     default the hiding commitment, version 2 of docs/commitment.md,
//     under openings drawn at random per call, whose disclosure is
//     written to the disclosures directory, synced, before ledgerd is
//     asked, and removed if ledgerd refuses the request; Config.Commitment
//     "v1" for version 1), then minimized by the tool's declaration, then
//     decided by ledgerd (POST
//     /v1/decide with the gateway's mediator token), its answer verified
//     against the log's key and its definition digest checked against the
//     gateway's own declaration. allow: forwarded with the same bytes, and
//     the outcome (succeeded, failed on isError, unknown on a transport
//     error or timeout) recorded in the log as a version 5 entry after the
//     agent has its answer. deny: a tool error naming the decision, the
//     determining policies and the entry. needs_approval: see below.
//     Whatever fails (the ledger unreachable, an error answer, arguments
//     the declaration refuses) is a tool error naming why, and nothing is
//     forwarded.
//   - Approvals: the gateway sends ledgerd a preview of the call (the tool
//     and its arguments, redacted then bounded by approval/preview) and
//     points the agent at the approver's page: by URL-mode elicitation
//     when its client supports it (a multi round-trip input request with
//     an HMAC-authenticated, single-use request state for 2026-07-28
//     clients; an elicitation request for earlier ones), otherwise by a
//     bounded wait for the verdict and then a tool error naming the
//     approval and its page. A retry (with the state, or the same
//     arguments again) recomputes the digest from the arguments it
//     carries — with the hiding commitment, under the openings of the
//     call that opened the approval, which the gateway keeps in memory
//     until the approval is settled — consumes the approval at the
//     ledger, which admits one consumption of the request's exact terms,
//     forwards, and records the outcome. A retry whose openings the
//     gateway lost (a restart) cannot consume and is told to ask again.
//     A client's "accept" is never approval: only a verdict an approver
//     gave on the page is.
//   - No argument or result value reaches a log line, a metric label, an
//     error or a ledger byte, except fields a declaration tiers policy (and
//     projections of derived ones); no opening reaches any of them nor an
//     MCP answer: openings are only in the disclosure files.
//
// The package imports commit, client, approval/preview, internal/atomicfile
// and the MCP Go SDK, never the ledger, a store or ledgerd's server
// (internal/rooms holds it to this).
package mcpgate
