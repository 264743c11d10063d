// The ledgerd client (docs/api.md): decide, append, approval status and
// wait, consume, outcomes, entries, checkpoints and the action catalog.
// Every receipt is verified with the log's verifier key before it is
// returned: the entry's strict encoding, its signature, its index, and
// that it records exactly what was sent. Go's package client is the
// reference.

import { randomBytes } from "node:crypto";
import { canonicalize, digestEqual, isParamsDigest } from "./canonical.js";
import { Declaration } from "./declare.js";
import { type Entry, entryHash, parseEntry } from "./entry.js";
import { DomainError, LedgerError } from "./errors.js";
import { JsonNumber, type JsonObject, type JsonText, type JsonValue, parseObjectWithRaw } from "./json.js";
import { renderPreview } from "./preview.js";
import { type Checkpoint, VerificationError, VerifierKey, verifyInclusion } from "./verify.js";
import { leafHash } from "./entry.js";

/** A refusal by the server: its HTTP status, stable error code and, for lifecycle refusals, the differing term. */
export class ApiError extends LedgerError {
  readonly status: number;
  readonly term: string;
  readonly serverMessage: string;
  constructor(status: number, code: string, message: string, term: string) {
    super(code || `http_${status}`, `ledgerd: ${status} ${code}${term !== "" ? ` (${term})` : ""}: ${message}`);
    this.name = "ApiError";
    this.status = status;
    this.term = term;
    this.serverMessage = message;
  }
}

/** A request the client refuses before sending anything (a bad idempotency key, parameters outside the domain). */
export class ClientError extends LedgerError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, `client: ${message}`, options);
    this.name = "ClientError";
  }
}

function unverified(message: string, cause?: unknown): VerificationError {
  return new VerificationError("receipt", message, cause === undefined ? undefined : { cause });
}

export interface ClientOptions {
  /** "http://host:port". */
  baseURL: string;
  /** The mediator's bearer token. */
  token: string;
  /** The log's note verifier key (or a parsed one). */
  verifierKey: string | VerifierKey;
  /** Tries of one request on 429, 503 and network errors. Default 5. */
  maxAttempts?: number;
  /** The wait before the second try in ms, doubled after each; Retry-After wins. Default 100. */
  backoffMs?: number;
  /** The fetch to use. Default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** What a mediator asks the ledger to decide (POST /v1/decide). */
export interface DecideRequest {
  principal: string;
  action: string;
  /**
   * The parameter commitment the minimization produced, sent as it is:
   * version 1 ("sha256:…", the default) or version 2 ("v2:sha256:…",
   * minimize with commitmentVersion 2). The receipt must record it exactly.
   */
  params: { digest: string; size: number };
  tiersDigest: string;
  /** The minimized attributes: JSON text of an object (MinimizeResult.attributes). */
  attributes: JsonText;
  /** The preview document for approvers, if the ledger decides needs_approval: JSON text. */
  preview?: JsonText;
}

/** What a mediator records (POST /v1/entries): a DecideRequest with the mediator's own decision. */
export interface AppendRequest extends DecideRequest {
  decision: "allow" | "deny" | "needs_approval";
  policies: readonly string[];
}

export interface RequestOptions {
  /** Makes the request safe to repeat (1 to 128 printable ASCII characters). Default: a random key per call. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** An approval a needs_approval decision opened. */
export interface OpenedApproval {
  id: string;
  pendingDeadline: string;
  previewDigest: string;
}

/** A verified receipt of a durable entry. */
export interface Receipt {
  index: number;
  entry: Entry;
  /** The signed entry's bytes. */
  raw: Buffer;
  /** The idempotency key named an entry appended before. */
  replayed: boolean;
  approval: OpenedApproval | undefined;
}

export interface Decided extends Receipt {
  decision: string;
  policies: string[];
  policyErrors: string[];
  policySet: string;
}

export interface Terms {
  action: string;
  principal: string;
  /** The commitment of the call retried, of the request's version (a version 2 one made with the first call's disclosure as the openings). */
  params: { digest: string; size: number };
}

export type ApprovalStateName = "pending" | "approved" | "denied" | "expired" | "consumed";

export interface ApprovalState {
  id: string;
  request: number;
  state: ApprovalStateName;
  mediator: string;
  principal: string;
  action: string;
  params: { digest: string; size: number };
  pendingDeadline: string;
  verdict: string | undefined;
  verdictIndex: number | undefined;
  approver: string | undefined;
  executionDeadline: string | undefined;
  consumption: number | undefined;
  outcome: string | undefined;
  /** The verified verdict entry, once there is a verdict (waitApproval). */
  verdictEntry: Entry | undefined;
  /** The server's answer as sent. */
  raw: Record<string, unknown>;
}

export interface ActionSummary {
  action: string;
  tiersDigest: string;
  definitionDigest: string;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

function newKey(): string {
  return randomBytes(16).toString("hex");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function str(v: JsonValue | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function num(v: JsonValue | undefined): number | undefined {
  return v instanceof JsonNumber && /^(0|[1-9][0-9]*)$/.test(v.lexeme) ? Number(v.lexeme) : undefined;
}

function strList(v: JsonValue | undefined): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : undefined;
}

/** A client of one ledgerd, as one mediator. */
export class LedgerClient {
  readonly baseURL: string;
  readonly key: VerifierKey;
  private readonly token: string;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseURL = options.baseURL.replace(/\/$/, "");
    this.token = options.token;
    this.key = typeof options.verifierKey === "string" ? new VerifierKey(options.verifierKey) : options.verifierKey;
    this.maxAttempts = options.maxAttempts !== undefined && options.maxAttempts > 0 ? options.maxAttempts : 5;
    this.backoffMs = options.backoffMs !== undefined && options.backoffMs > 0 ? options.backoffMs : 100;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  // ---- transport ----

  private async post(path: string, body: string, opts: RequestOptions): Promise<{ status: number; body: Buffer }> {
    const key = opts.idempotencyKey ?? newKey();
    if (!IDEMPOTENCY_KEY.test(key)) throw new ClientError("bad_idempotency_key", "an idempotency key is 1 to 128 printable ASCII characters, without spaces");
    let backoff = this.backoffMs;
    let last: unknown;
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      if (attempt > 0) {
        await sleep(backoff, opts.signal);
        backoff *= 2;
      }
      let resp: Response;
      try {
        resp = await this.fetchImpl(this.baseURL + path, {
          method: "POST",
          headers: { authorization: `Bearer ${this.token}`, "idempotency-key": key, "content-type": "application/json" },
          body,
          ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
        });
      } catch (e) {
        if (opts.signal?.aborted) throw e;
        last = e;
        continue;
      }
      const b = Buffer.from(await resp.arrayBuffer());
      if (resp.status === 200 || resp.status === 201) return { status: resp.status, body: b };
      const err = apiError(resp.status, b);
      if (resp.status === 429 || resp.status === 503) {
        last = err;
        const ra = resp.headers.get("retry-after");
        if (ra !== null && /^[0-9]+$/.test(ra)) backoff = Number(ra) * 1000;
        continue;
      }
      throw err;
    }
    if (last instanceof ApiError) throw last;
    throw new ClientError("unreachable", `${path} failed after ${this.maxAttempts} attempts`, { cause: last });
  }

  private async get(path: string, signal?: AbortSignal): Promise<Buffer> {
    const resp = await this.fetchImpl(this.baseURL + path, {
      headers: this.token !== "" ? { authorization: `Bearer ${this.token}` } : {},
      ...(signal !== undefined ? { signal } : {}),
    });
    const b = Buffer.from(await resp.arrayBuffer());
    if (resp.status !== 200) throw apiError(resp.status, b);
    return b;
  }

  // ---- receipts ----

  /** Parses an answer holding a receipt and verifies its entry: strict encoding, the ledger's key, the index claimed. */
  private signedEntry(body: Buffer): { answer: JsonObject; index: number; entry: Entry } {
    let answer: JsonObject;
    let raw: Map<string, Buffer>;
    try {
      ({ value: answer, raw } = parseObjectWithRaw(body, { maxBytes: 1 << 20 }));
    } catch (e) {
      throw unverified("malformed receipt", e);
    }
    const index = num(answer.get("index"));
    const rawEntry = raw.get("entry");
    if (index === undefined || rawEntry === undefined) throw unverified("malformed receipt");
    let e: Entry;
    try {
      e = parseEntry(rawEntry);
    } catch (err) {
      throw new VerificationError("encoding", "the receipt's entry is not a valid entry", { cause: err });
    }
    if (e.index !== index) throw new VerificationError("index", `the receipt says index ${index}, its entry ${e.index}`);
    this.key.verifyEntry(e);
    return { answer, index, entry: e };
  }

  private checkRecords(e: Entry, d: DecideRequest, attrs: Buffer): void {
    const m = e.members;
    const same =
      m["principal"] === d.principal &&
      m["action"] === d.action &&
      m["params_digest"] === d.params.digest &&
      m["params_size"] === d.params.size &&
      m["tiers_digest"] === d.tiersDigest &&
      e.attributes !== undefined &&
      e.attributes.equals(attrs);
    if (!same) throw unverified("the entry does not record the request sent");
  }

  private checkOpened(answer: JsonObject, e: Entry, shown: string | undefined): OpenedApproval | undefined {
    const a = answer.get("approval");
    if (a === undefined || a === null) {
      if (shown !== undefined && e.members["decision"] === "needs_approval") throw unverified("a needs_approval decision sent with a preview opened no approval");
      return undefined;
    }
    if (e.members["decision"] !== "needs_approval") throw unverified("a decision other than needs_approval names an approval");
    if (!(a instanceof Map)) throw unverified("malformed approval");
    const id = str(a.get("id"));
    const deadline = str(a.get("pending_deadline"));
    const previewDigest = str(a.get("preview_digest"));
    if (id === undefined || deadline === undefined || previewDigest === undefined) throw unverified("malformed approval");
    if (!digestEqual(id, entryHash(e))) throw unverified("the approval's id is not the entry hash of the decision");
    if (!(Date.parse(deadline) > Date.parse(e.time) || (deadline.length === e.time.length && deadline > e.time))) {
      throw unverified("the approval's pending deadline is not after the decision's time");
    }
    if (!/^sha256:[0-9a-f]{64}$/.test(previewDigest) || /^sha256:0{64}$/.test(previewDigest)) throw unverified("the approval has no preview digest");
    if (shown !== undefined && !digestEqual(previewDigest, shown)) throw unverified("the approval's preview digest is not that of the preview sent");
    return { id, pendingDeadline: deadline, previewDigest };
  }

  private requestBody(d: DecideRequest, extra: Record<string, unknown>): { body: string; attrs: Buffer; shown: string | undefined } {
    let attrs: Buffer;
    try {
      attrs = canonicalize(d.attributes);
    } catch (e) {
      if (e instanceof DomainError) throw new ClientError("bad_attributes", `attributes: ${e.code} at ${JSON.stringify(e.pointer)}`, { cause: e });
      throw e;
    }
    if (attrs[0] !== 0x7b) throw new ClientError("bad_attributes", "attributes: not a JSON object");
    let shown: string | undefined;
    let preview: Buffer | undefined;
    if (d.preview !== undefined) {
      try {
        shown = renderPreview(d.preview).digest;
        preview = canonicalize(d.preview);
      } catch (e) {
        throw new ClientError("bad_preview", `preview: ${(e as Error).message}`, { cause: e });
      }
    }
    const fields: string[] = [
      `"principal":${JSON.stringify(d.principal)}`,
      `"action":${JSON.stringify(d.action)}`,
      ...Object.entries(extra).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`),
      `"params_digest":${JSON.stringify(d.params.digest)}`,
      `"params_size":${JSON.stringify(d.params.size)}`,
      `"tiers_digest":${JSON.stringify(d.tiersDigest)}`,
      `"attributes":${attrs.toString("utf8")}`,
    ];
    if (preview !== undefined) fields.push(`"preview":${preview.toString("utf8")}`);
    return { body: `{${fields.join(",")}}`, attrs, shown };
  }

  // ---- decisions ----

  /**
   * Asks the ledger to decide and record its decision (POST /v1/decide),
   * and returns the verified answer: a version 3 ledger decision that
   * records exactly the request, whose decision, ids and policy set are
   * the answer's.
   */
  async decide(d: DecideRequest, opts: RequestOptions = {}): Promise<Decided> {
    const { body, attrs, shown } = this.requestBody(d, {});
    const r = await this.post("/v1/decide", body, opts);
    const { answer, index, entry: e } = this.signedEntry(r.body);
    this.checkRecords(e, d, attrs);
    if (e.version !== 3 || e.kind !== "decision") throw unverified("the entry is not a decision the ledger made (version 3, kind decision)");
    const decision = str(answer.get("decision"));
    const policies = strList(answer.get("policies"));
    const policyErrors = strList(answer.get("policy_errors"));
    const policySet = str(answer.get("policy_set"));
    const m = e.members;
    if (
      decision === undefined || policies === undefined || policyErrors === undefined || policySet === undefined ||
      decision !== m["decision"] || JSON.stringify(policies) !== JSON.stringify(m["policies"]) ||
      JSON.stringify(policyErrors) !== JSON.stringify(m["policy_errors"]) || policySet !== m["policy_set"]
    ) {
      throw unverified("the answer's decision is not the entry's");
    }
    const approval = this.checkOpened(answer, e, shown);
    return { index, entry: e, raw: e.raw, replayed: r.status === 200, approval, decision, policies, policyErrors, policySet };
  }

  /** Appends a mediator's decision (POST /v1/entries) and returns its verified receipt. */
  async append(d: AppendRequest, opts: RequestOptions = {}): Promise<Receipt> {
    const sorted = [...d.policies].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const { body, attrs, shown } = this.requestBody(d, { decision: d.decision, policies: d.policies });
    const r = await this.post("/v1/entries", body, opts);
    const { answer, index, entry: e } = this.signedEntry(r.body);
    this.checkRecords(e, d, attrs);
    if (e.members["decision"] !== d.decision || JSON.stringify(e.members["policies"]) !== JSON.stringify(sorted)) {
      throw unverified("the entry does not record the decision sent");
    }
    const approval = this.checkOpened(answer, e, shown);
    return { index, entry: e, raw: e.raw, replayed: r.status === 200, approval };
  }

  /**
   * Reports the outcome of the act an allow decision permitted (POST
   * /v1/entries/{index}/outcome): a verified version 5 outcome entry.
   */
  async outcome(decisionIndex: number, result: "succeeded" | "failed" | "unknown", operationId?: string, opts: RequestOptions = {}): Promise<Receipt> {
    const body = JSON.stringify(operationId !== undefined ? { result, operation_id: operationId } : { result });
    const r = await this.post(`/v1/entries/${decisionIndex}/outcome`, body, opts);
    const { index, entry: e } = this.signedEntry(r.body);
    const m = e.members;
    if (e.version !== 5 || e.kind !== "outcome") throw unverified("the entry is not an outcome (version 5, kind outcome)");
    if (m["decision"] !== decisionIndex || m["result"] !== result || m["operation_id"] !== operationId) {
      throw unverified("the outcome does not record what was sent");
    }
    return { index, entry: e, raw: e.raw, replayed: r.status === 200, approval: undefined };
  }

  // ---- approvals ----

  /** The server's (unsigned) account of an approval (GET /v1/approvals/{id}). */
  async approval(id: string, signal?: AbortSignal): Promise<ApprovalState> {
    if (!/^sha256:[0-9a-f]{64}$/.test(id)) throw new ClientError("bad_approval_id", "an approval id is sha256: and 64 lower-case hex digits");
    const b = await this.get(`/v1/approvals/${id}`, signal);
    let raw: Record<string, unknown>;
    try {
      raw = JSON.parse(b.toString("utf8")) as Record<string, unknown>;
    } catch (e) {
      throw unverified("malformed approval", e);
    }
    if (raw["id"] !== id) throw unverified("the answer names another approval");
    const state = raw["state"];
    if (typeof state !== "string" || !["pending", "approved", "denied", "expired", "consumed"].includes(state)) throw unverified("unknown approval state");
    const s = (k: string): string | undefined => (typeof raw[k] === "string" ? (raw[k] as string) : undefined);
    const n = (k: string): number | undefined => (typeof raw[k] === "number" ? (raw[k] as number) : undefined);
    if (raw["params_digest"] !== undefined && !(typeof raw["params_digest"] === "string" && isParamsDigest(raw["params_digest"]))) {
      throw unverified("malformed approval: params_digest is not a parameter digest of either version");
    }
    return {
      id,
      request: n("request") ?? -1,
      state: state as ApprovalStateName,
      mediator: s("mediator") ?? "",
      principal: s("principal") ?? "",
      action: s("action") ?? "",
      params: { digest: s("params_digest") ?? "", size: n("params_size") ?? 0 },
      pendingDeadline: s("pending_deadline") ?? "",
      verdict: s("verdict"),
      verdictIndex: n("verdict_index"),
      approver: s("approver"),
      executionDeadline: s("execution_deadline"),
      consumption: n("consumption"),
      outcome: s("outcome"),
      verdictEntry: undefined,
      raw,
    };
  }

  /**
   * Waits for a person's verdict: polls approval(id) until it is no longer
   * pending, then fetches the verdict's entry and verifies that it is the
   * ledger's signed verdict on this approval. Ends with the signal.
   */
  async waitApproval(id: string, options: { pollMs?: number; signal?: AbortSignal } = {}): Promise<ApprovalState> {
    const poll = options.pollMs !== undefined && options.pollMs > 0 ? options.pollMs : 1000;
    for (;;) {
      try {
        const st = await this.approval(id, options.signal);
        if (st.state !== "pending") return await this.checkVerdict(st, options.signal);
      } catch (e) {
        if (!(e instanceof ApiError && (e.status === 429 || e.status === 503))) throw e;
      }
      await sleep(poll, options.signal);
    }
  }

  private async checkVerdict(st: ApprovalState, signal?: AbortSignal): Promise<ApprovalState> {
    const want = st.verdict;
    if ((st.state === "approved" || st.state === "consumed") && want !== "approve") throw unverified(`an approval ${st.state} without the verdict approve`);
    if (st.state === "denied" && want !== "deny") throw unverified("an approval denied without the verdict deny");
    if (st.state === "expired" && want === undefined) return st;
    if (st.verdictIndex === undefined) throw unverified("a verdict without its entry's index");
    const e = await this.entry(st.verdictIndex, signal);
    if (e.version !== 4 || e.kind !== "approval") throw unverified(`entry ${st.verdictIndex} is not a verdict (version 4, kind approval)`);
    if (e.members["approval"] !== st.id) throw unverified(`entry ${st.verdictIndex} is a verdict on another approval`);
    if (e.members["verdict"] !== want) throw unverified(`entry ${st.verdictIndex} records another verdict`);
    return { ...st, verdictEntry: e };
  }

  /**
   * Spends an approved approval once, repeating the request's terms
   * exactly (POST /v1/approvals/{id}/consume); returns the verified
   * consumption receipt. Act only on it.
   */
  async consume(id: string, terms: Terms, opts: RequestOptions = {}): Promise<Receipt & { request: number }> {
    const body = JSON.stringify({ action: terms.action, principal: terms.principal, params_digest: terms.params.digest, params_size: terms.params.size });
    const r = await this.post(`/v1/approvals/${id}/consume`, body, opts);
    const { index, entry: e } = this.signedEntry(r.body);
    const m = e.members;
    if (e.version !== 4 || e.kind !== "consumption") throw unverified("the entry is not a consumption (version 4, kind consumption)");
    if (m["approval"] !== id) throw unverified("the consumption spends another approval");
    if (m["action"] !== terms.action || m["principal"] !== terms.principal || m["params_digest"] !== terms.params.digest || m["params_size"] !== terms.params.size) {
      throw unverified("the consumption does not record the terms sent");
    }
    return { index, entry: e, raw: e.raw, replayed: r.status === 200, approval: undefined, request: m["request"] as number };
  }

  /** Reports the outcome of the act a consumption permitted (POST /v1/approvals/{id}/outcome). */
  async approvalOutcome(id: string, consumption: number, result: "succeeded" | "failed" | "unknown", operationId?: string, opts: RequestOptions = {}): Promise<Receipt> {
    const body = JSON.stringify(operationId !== undefined ? { consumption, result, operation_id: operationId } : { consumption, result });
    const r = await this.post(`/v1/approvals/${id}/outcome`, body, opts);
    const { index, entry: e } = this.signedEntry(r.body);
    const m = e.members;
    if (e.version !== 4 || e.kind !== "outcome") throw unverified("the entry is not an outcome (version 4, kind outcome)");
    if (m["approval"] !== id || m["consumption"] !== consumption) throw unverified("the outcome reports on another approval or consumption");
    if (m["result"] !== result || m["operation_id"] !== operationId) throw unverified("the outcome does not record the result sent");
    return { index, entry: e, raw: e.raw, replayed: r.status === 200, approval: undefined };
  }

  // ---- reads ----

  /** Fetches and verifies the signed entry at index (GET /v1/entries/{index}). */
  async entry(index: number, signal?: AbortSignal): Promise<Entry> {
    const b = await this.get(`/v1/entries/${index}`, signal);
    let e: Entry;
    try {
      e = parseEntry(b);
    } catch (err) {
      throw new VerificationError("encoding", `entry ${index} is not a valid entry`, { cause: err });
    }
    if (e.index !== index) throw new VerificationError("index", `asked for entry ${index}, got entry ${e.index}`);
    this.key.verifyEntry(e);
    return e;
  }

  /** Fetches the latest checkpoint and opens it with the ledger's key. */
  async checkpoint(signal?: AbortSignal): Promise<Checkpoint> {
    return this.key.openCheckpoint(await this.get("/v1/checkpoint", signal));
  }

  /** Fetches the inclusion proof of a receipt's entry in a verified checkpoint's tree and checks it. */
  async verifyInclusion(r: { index: number; raw: Buffer }, cp: Checkpoint, signal?: AbortSignal): Promise<void> {
    const b = await this.get(`/v1/inclusion?index=${r.index}&tree_size=${cp.size}`, signal);
    const p = JSON.parse(b.toString("utf8")) as { tree_size?: unknown; hashes?: unknown };
    if (p.tree_size !== cp.size || !Array.isArray(p.hashes) || !p.hashes.every((h) => typeof h === "string")) throw new VerificationError("inclusion", "malformed inclusion proof");
    const hashes = (p.hashes as string[]).map((h) => Buffer.from(h, "base64"));
    if (!verifyInclusion(r.index, cp.size, leafHash(r.raw), hashes, cp.root)) throw new VerificationError("inclusion", `entry ${r.index} is not in the checkpoint's tree`);
  }

  /** The catalog's actions and their digests (GET /v1/actions). */
  async actions(signal?: AbortSignal): Promise<ActionSummary[]> {
    const b = await this.get("/v1/actions", signal);
    let doc: { actions?: unknown };
    try {
      doc = JSON.parse(b.toString("utf8")) as typeof doc;
    } catch (e) {
      throw unverified("malformed action list", e);
    }
    if (!Array.isArray(doc.actions)) throw unverified("malformed action list");
    const seen = new Set<string>();
    return doc.actions.map((a: { action?: unknown; tiers_digest?: unknown; definition_digest?: unknown }, i) => {
      if (typeof a !== "object" || a === null || typeof a.action !== "string" || typeof a.tiers_digest !== "string" || typeof a.definition_digest !== "string" ||
        !DIGEST.test(a.tiers_digest) || !DIGEST.test(a.definition_digest)) {
        throw unverified(`malformed action list: item ${i}`);
      }
      if (seen.has(a.action)) throw unverified(`malformed action list: item ${i} lists an action again`);
      seen.add(a.action);
      return { action: a.action, tiersDigest: a.tiers_digest, definitionDigest: a.definition_digest };
    });
  }

  /**
   * Fetches an action's declaration as the server serves it, byte for
   * byte (GET /v1/actions/{action}), parses it, recomputes its
   * applied-tiers and definition digests and compares them with those
   * GET /v1/actions lists; a difference is a VerificationError.
   */
  async declaration(action: string, signal?: AbortSignal): Promise<Declaration> {
    const list = await this.actions(signal);
    const listed = list.find((a) => a.action === action);
    if (listed === undefined) throw new VerificationError("declaration", `the server lists no declaration of ${action}`);
    return this.listedDeclaration(listed, signal);
  }

  /**
   * Fetches the declaration of listed.action (GET /v1/actions/{action}),
   * parses it and requires the applied-tiers and definition digests that
   * listed (an item of actions()) names; a difference is a
   * VerificationError.
   */
  async listedDeclaration(listed: ActionSummary, signal?: AbortSignal): Promise<Declaration> {
    const action = listed.action;
    const d = Declaration.parse(await this.get(`/v1/actions/${encodeURIComponent(action)}`, signal));
    if (d.action !== action) throw new VerificationError("declaration", `the server's declaration of ${action} is not the one it lists`);
    if (!digestEqual(d.tiersDigest(), listed.tiersDigest) || !digestEqual(d.definitionDigest(), listed.definitionDigest)) {
      throw new VerificationError("declaration", `the digests of the declaration of ${action} are not those the server lists`);
    }
    return d;
  }
}

function apiError(status: number, body: Buffer): ApiError {
  let e: { error?: { code?: unknown; message?: unknown; term?: unknown } } = {};
  try {
    e = JSON.parse(body.toString("utf8")) as typeof e;
  } catch {
    // not JSON: the status alone
  }
  const f = e.error ?? {};
  return new ApiError(status, typeof f.code === "string" ? f.code : "", typeof f.message === "string" ? f.message : "", typeof f.term === "string" ? f.term : "");
}
