// Declarations as ledgerd distributes them (docs/api.md "With an action
// catalog"), cached by definition digest, and the refusal of a request
// minimized under a declaration the server no longer holds.
//
// A DeclarationSource keeps the last read of GET /v1/actions for
// listingSeconds (default 60) and each declaration it fetched with GET
// /v1/actions/{action}, keyed by its definition digest. A cached
// declaration is served while the listing names its digest; once the
// listing names another, the new file is fetched and its digests are
// recomputed and compared with the listing's. When ledgerd refuses a
// decide or append through the source as made under a stale declaration
// (422 tiers_mismatch, attributes_not_declared or unknown_action), the
// source drops the action's cached declarations, reads the listing again
// on its next call, and throws StaleDeclarationError. It never repeats the
// request under the new declaration: the caller minimizes again, because
// a new declaration may move a field to a tier that crosses raw, and
// whether that call should still be made is the caller's decision.

import {
  ApiError,
  ClientError,
  type ActionSummary,
  type AppendRequest,
  type Decided,
  type DecideRequest,
  type LedgerClient,
  type Receipt,
  type RequestOptions,
} from "./client.js";
import type { Declaration } from "./declare.js";

/** The catalog refusals that say the request was made under another declaration than the server's (docs/api.md). */
export const STALE_DECLARATION_CODES: ReadonlySet<string> = new Set(["tiers_mismatch", "attributes_not_declared", "unknown_action"]);

/**
 * ledgerd refused a request as made under a declaration it does not hold
 * (HTTP 422; code tiers_mismatch, attributes_not_declared or
 * unknown_action). The source that threw it has dropped the cached
 * declaration; minimize again under the one its next call fetches, if the
 * call should still be made.
 */
export class StaleDeclarationError extends ApiError {
  /** The action of the refused request. */
  readonly action: string;
  /** The applied-tiers digest the refused request attested. */
  readonly tiersDigest: string;
  /** The definition digest of the cached declaration with that applied-tiers digest, if the source held one. */
  readonly definitionDigest: string | undefined;
  constructor(refusal: ApiError, action: string, tiersDigest: string, definitionDigest: string | undefined) {
    super(refusal.status, refusal.code, refusal.serverMessage, refusal.term);
    this.name = "StaleDeclarationError";
    this.action = action;
    this.tiersDigest = tiersDigest;
    this.definitionDigest = definitionDigest;
    this.cause = refusal;
    this.message =
      `ledgerd: ${refusal.status} ${refusal.code}: the declaration of ${action} the request was minimized under ` +
      `(applied tiers ${tiersDigest}${definitionDigest !== undefined ? `, definition ${definitionDigest}` : ""}) is not the server's; ` +
      `dropped from the cache: ${refusal.serverMessage}`;
  }
}

export interface DeclarationSourceOptions {
  /**
   * Optional. How long a read of GET /v1/actions is used before it is read
   * again, in seconds; 0 reads it on every call. Default 60. A refusal
   * through the source makes the next call read it whatever this says.
   */
  listingSeconds?: number;
  /** Optional. The clock, in milliseconds. Default Date.now. */
  now?: () => number;
}

/** The declarations of one ledgerd's catalog, fetched on demand and cached by definition digest. */
export class DeclarationSource {
  readonly client: LedgerClient;
  private readonly listingMs: number;
  private readonly now: () => number;
  private listing: Map<string, ActionSummary> | undefined;
  private listedAt = 0;
  private relist = true;
  private readonly byDigest = new Map<string, Declaration>();

  constructor(client: LedgerClient, options: DeclarationSourceOptions = {}) {
    const s = options.listingSeconds ?? 60;
    if (!Number.isFinite(s) || s < 0) throw new ClientError("bad_option", "listingSeconds: a number of seconds, at least 0");
    this.client = client;
    this.listingMs = s * 1000;
    this.now = options.now ?? Date.now;
  }

  /**
   * The server's declaration of action: the cached one while the listing
   * (read at most every listingSeconds) names its definition digest, else
   * fetched, its applied-tiers and definition digests recomputed and
   * required to be the listing's.
   */
  async get(action: string, signal?: AbortSignal): Promise<Declaration> {
    const listed = (await this.list(signal)).get(action);
    if (listed === undefined) throw new ClientError("unknown_action", `${action}: the server's catalog (GET /v1/actions) lists no such action`);
    const cached = this.byDigest.get(listed.definitionDigest);
    if (cached !== undefined) return cached;
    let d: Declaration;
    try {
      d = await this.client.listedDeclaration(listed, signal);
    } catch (e) {
      // The listing may be older than the file (ledgerd restarted between them).
      this.relist = true;
      throw e;
    }
    this.byDigest.set(listed.definitionDigest, d);
    return d;
  }

  /** The declaration of action the source would serve without reading anything, if it holds one. */
  cached(action: string): Declaration | undefined {
    const listed = this.listing?.get(action);
    return listed === undefined ? undefined : this.byDigest.get(listed.definitionDigest);
  }

  /**
   * LedgerClient.decide, with a refusal of a stale declaration thrown as
   * StaleDeclarationError and that declaration dropped. req.tiersDigest is
   * sent, and the receipt's entry required to record it, as by the client.
   */
  async decide(req: DecideRequest, opts: RequestOptions = {}): Promise<Decided> {
    try {
      return await this.client.decide(req, opts);
    } catch (e) {
      throw this.refused(req, e);
    }
  }

  /** LedgerClient.append, with refusals as decide's. */
  async append(req: AppendRequest, opts: RequestOptions = {}): Promise<Receipt> {
    try {
      return await this.client.append(req, opts);
    } catch (e) {
      throw this.refused(req, e);
    }
  }

  private async list(signal?: AbortSignal): Promise<Map<string, ActionSummary>> {
    const now = this.now();
    if (this.listing !== undefined && !this.relist && now >= this.listedAt && now - this.listedAt < this.listingMs) return this.listing;
    const items = await this.client.actions(signal);
    this.listing = new Map(items.map((a) => [a.action, a]));
    this.listedAt = now;
    this.relist = false;
    const live = new Set(items.map((a) => a.definitionDigest));
    for (const digest of this.byDigest.keys()) if (!live.has(digest)) this.byDigest.delete(digest);
    return this.listing;
  }

  private refused(req: DecideRequest, e: unknown): unknown {
    if (!(e instanceof ApiError) || e.status !== 422 || !STALE_DECLARATION_CODES.has(e.code)) return e;
    let definition: string | undefined;
    for (const [digest, d] of this.byDigest) {
      if (d.action !== req.action) continue;
      if (d.tiersDigest() === req.tiersDigest) definition = digest;
      this.byDigest.delete(digest);
    }
    this.relist = true;
    return new StaleDeclarationError(e, req.action, req.tiersDigest, definition);
  }
}
