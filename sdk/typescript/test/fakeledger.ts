// A stand-in for ledgerd behind the client's fetch option, which records
// whatever parameter digest it is sent (either version) and can be told to
// record something else (mutate). It signs the entries it answers with a
// fresh Ed25519 key, in the encoding of docs/entry.md, so the client
// verifies them as it does a real ledgerd's; it checks nothing of a
// request beyond reading it.
import { createHash, generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { canonicalizeValue, parse, type JsonInput, type JsonObject } from "../src/index.js";

export interface FakeLedger {
  fetch: typeof fetch;
  verifierKey: string;
  /** Each request's method, path and body, in order. */
  requests: { method: string; path: string; body: string }[];
  /** The approval state GET /v1/approvals/{id} answers (the id is the path's). */
  approvalState: Record<string, unknown>;
  /** Changes each signed entry's object before it is signed (a ledger recording something else). */
  mutate: (entry: Record<string, JsonInput>) => void;
}

const NAME = "ledger.example.com/fake";
const ZERO = "sha256:" + "0".repeat(64);

function keyPair(): { vkey: string; keyId: string; priv: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.concat([Buffer.of(1), publicKey.export({ format: "der", type: "spki" }).subarray(12)]);
  const hash = createHash("sha256").update(NAME + "\n").update(raw).digest().subarray(0, 4).toString("hex");
  return { vkey: `${NAME}+${hash}+${raw.toString("base64")}`, keyId: `${NAME}+${hash}`, priv: privateKey };
}

export function fakeLedger(): FakeLedger {
  const { vkey, keyId, priv } = keyPair();
  let index = 0;
  let prev = ZERO;
  const self: FakeLedger = {
    verifierKey: vkey,
    requests: [],
    approvalState: {},
    mutate: () => {},
    fetch: (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const url = new URL(String(input));
      const method = init?.method ?? "GET";
      const body = typeof init?.body === "string" ? init.body : "";
      self.requests.push({ method, path: url.pathname, body });
      const signed = (e: Record<string, JsonInput>): string => {
        Object.assign(e, { index, key_id: keyId, origin: NAME, prev, time: "2026-12-03T07:09:52.000000Z" });
        self.mutate(e);
        const version = e["version"] as number;
        const message = Buffer.concat([Buffer.from(`ledger/v${version}/entry\n`), canonicalizeValue(e)]);
        e["sig"] = sign(null, message, priv).toString("base64");
        prev = "sha256:" + createHash("sha256").update(message).digest("hex");
        index++;
        return canonicalizeValue(e).toString("utf8");
      };
      if (method === "POST" && url.pathname === "/v1/decide") {
        const req = parse(body) as JsonObject;
        const i = index;
        const entry = signed({
          version: 3,
          kind: "decision",
          action: req.get("action") as string,
          attributes: req.get("attributes") as JsonInput,
          decision: "allow",
          definition_digest: "sha256:" + "1".repeat(64),
          mediator: "m1",
          params_digest: req.get("params_digest") as string,
          params_size: req.get("params_size") as JsonInput,
          policies: ["payments.allow-known-payee"],
          policy_errors: [],
          policy_set: "sha256:" + "2".repeat(64),
          principal: req.get("principal") as string,
          tiers_digest: req.get("tiers_digest") as string,
        });
        const answer = `{"decision":"allow","entry":${entry},"index":${i},"policies":["payments.allow-known-payee"],"policy_errors":[],"policy_set":"sha256:${"2".repeat(64)}"}`;
        return new Response(answer, { status: 201 });
      }
      const consume = /^\/v1\/approvals\/(sha256:[0-9a-f]{64})\/consume$/.exec(url.pathname);
      if (method === "POST" && consume !== null) {
        const req = parse(body) as JsonObject;
        const i = index;
        const entry = signed({
          version: 4,
          kind: "consumption",
          action: req.get("action") as string,
          approval: consume[1]!,
          mediator: "m1",
          params_digest: req.get("params_digest") as string,
          params_size: req.get("params_size") as JsonInput,
          principal: req.get("principal") as string,
          request: 0,
        });
        return new Response(`{"entry":${entry},"index":${i}}`, { status: 201 });
      }
      const approval = /^\/v1\/approvals\/(sha256:[0-9a-f]{64})$/.exec(url.pathname);
      if (method === "GET" && approval !== null) {
        return new Response(JSON.stringify({ id: approval[1], ...self.approvalState }), { status: 200 });
      }
      return new Response('{"error":{"code":"not_found","message":"the fake ledger does not serve this"}}', { status: 404 });
    }) as typeof fetch,
  };
  return self;
}
