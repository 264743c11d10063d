import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { LedgerClient, ApiError, VerificationError, Declaration, entryHash, type Decided } from "../src/index.js";
import { startLedgerd, giveVerdict, type Ledgerd } from "./ledgerd.js";
import { repoFile } from "./testutil.js";
import { createHash, generateKeyPairSync } from "node:crypto";

/** A fresh Ed25519 note verifier key named name. */
function otherKey(name: string): string {
  const { publicKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.concat([Buffer.of(1), publicKey.export({ format: "der", type: "spki" }).subarray(12)]);
  const hash = createHash("sha256").update(name + "\n").update(raw).digest().subarray(0, 4).toString("hex");
  return `${name}+${hash}+${raw.toString("base64")}`;
}

let ledgerd: Ledgerd;
let client: LedgerClient;
const payees = { payees: ["payee-0001"] };

before(async () => {
  ledgerd = await startLedgerd();
  client = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: ledgerd.verifierKey });
}, { timeout: 600_000 });

after(async () => {
  await ledgerd?.stop();
});

async function decidePayment(amount: number, preview?: string, c: LedgerClient = client): Promise<Decided> {
  const decl = await c.declaration("make_payment");
  const params = JSON.stringify({ payee: "payee-0001", amount_minor: amount, currency: "EUR", memo: "Invoice 4711" });
  const m = decl.minimize(params, { allowlists: payees });
  return c.decide({
    principal: "agent:sdk-test",
    action: "make_payment",
    params: m.params,
    tiersDigest: m.tiersDigest,
    attributes: m.attributes,
    ...(preview !== undefined ? { preview } : {}),
  });
}

test("declarations fetched from ledgerd, byte for byte, their digests recomputed", async () => {
  const listed = await client.actions();
  assert.equal(listed.length, 5);
  for (const a of listed) {
    const d = await client.declaration(a.action);
    const local = Declaration.parse(repoFile(`testdata/declarations/${a.action}.json`));
    assert.equal(d.definitionDigest(), local.definitionDigest(), a.action);
    assert.equal(d.tiersDigest(), a.tiersDigest, a.action);
  }
});

test("decide (allow), verified, then its outcome, and an idempotent replay", async () => {
  const d = await decidePayment(42000);
  assert.equal(d.decision, "allow");
  assert.equal(d.entry.version, 3);
  assert.equal(d.replayed, false);
  const o = await client.outcome(d.index, "succeeded", "op-1");
  assert.equal(o.entry.version, 5);
  assert.equal(o.entry.members["decision"], d.index);
  await assert.rejects(client.outcome(d.index, "failed"), (e: unknown) => e instanceof ApiError && e.code === "outcome_final" && e.status === 409);

  const decl = await client.declaration("make_payment");
  const m = decl.minimize(JSON.stringify({ payee: "payee-0001", amount_minor: 100, currency: "EUR" }), { allowlists: payees });
  const req = { principal: "agent:sdk-test", action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes };
  const first = await client.decide(req, { idempotencyKey: "sdk-test-replay-1" });
  const again = await client.decide(req, { idempotencyKey: "sdk-test-replay-1" });
  assert.equal(again.replayed, true);
  assert.equal(again.index, first.index);
  assert.ok(again.raw.equals(first.raw));
});

test("needs_approval: an approval opened, pending, approved by a person, consumed once, its outcome; a denial", async () => {
  const preview = JSON.stringify({ payee: "payee-0001", amount_minor: 250000, api_key: "secret-value" });
  const d = await decidePayment(250000, preview);
  assert.equal(d.decision, "needs_approval");
  assert.ok(d.approval !== undefined);
  const st = await client.approval(d.approval.id);
  assert.equal(st.state, "pending");
  assert.equal(st.request, d.index);
  const ac = new AbortController();
  const waited = client.waitApproval(d.approval.id, { pollMs: 20, signal: ac.signal });
  setTimeout(() => ac.abort(new Error("test: stop waiting")), 100);
  await assert.rejects(waited, /stop waiting/);
  const terms = { action: "make_payment", principal: "agent:sdk-test", params: { digest: d.entry.members["params_digest"] as string, size: d.entry.members["params_size"] as number } };
  await assert.rejects(client.consume(d.approval.id, terms), (e: unknown) => e instanceof ApiError && e.code === "approval_pending");

  // A person approves on the approver's page; the wait ends with the verified verdict entry.
  const id = d.approval.id;
  const waiting = client.waitApproval(id, { pollMs: 20, signal: AbortSignal.timeout(60_000) });
  await giveVerdict(ledgerd, id, "approve");
  const approved = await waiting;
  assert.equal(approved.state, "approved");
  assert.equal(approved.verdictEntry?.kind, "approval");
  assert.equal(approved.verdictEntry?.members["approver"], "alice");
  const used = await client.consume(id, terms, { idempotencyKey: "sdk-test-consume-1" });
  assert.equal(used.request, d.index);
  const replay = await client.consume(id, terms, { idempotencyKey: "sdk-test-consume-1" });
  assert.equal(replay.replayed, true);
  await assert.rejects(client.consume(id, terms), (e: unknown) => e instanceof ApiError && e.code === "approval_consumed");
  const out = await client.approvalOutcome(id, used.index, "succeeded", "op-2");
  assert.equal(out.entry.version, 4);
  assert.equal((await client.approval(id)).state, "consumed");

  // A denial ends the wait too, verified.
  const d2 = await decidePayment(300000, preview);
  assert.ok(d2.approval !== undefined);
  await giveVerdict(ledgerd, d2.approval.id, "deny");
  const denied = await client.waitApproval(d2.approval.id, { pollMs: 20, signal: AbortSignal.timeout(60_000) });
  assert.equal(denied.state, "denied");
  assert.equal(denied.verdictEntry?.members["verdict"], "deny");
});

test("append (the mediator's own decision), checkpoint and inclusion verified", async () => {
  const decl = await client.declaration("make_payment");
  const m = decl.minimize(repoFile("testdata/calls/make_payment.json"), { allowlists: payees });
  const r = await client.append({
    principal: "agent:sdk-test",
    action: "make_payment",
    decision: "deny",
    policies: ["z.policy", "a.policy"],
    params: m.params,
    tiersDigest: m.tiersDigest,
    attributes: m.attributes,
  });
  assert.equal(r.entry.version, 2);
  assert.deepEqual(r.entry.members["policies"], ["a.policy", "z.policy"]);
  const deadline = Date.now() + 30_000;
  let cp = await client.checkpoint();
  while (cp.size <= r.index && Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 20));
    cp = await client.checkpoint();
  }
  assert.ok(cp.size > r.index, "a checkpoint covers the entry");
  await client.verifyInclusion(r, cp);
  const e = await client.entry(r.index);
  assert.ok(e.raw.equals(r.raw));
});

test("a tampered receipt is refused, never returned", async () => {
  const tamper = (mutate: (entry: string) => string): typeof fetch =>
    (async (input: string | URL | Request, init?: RequestInit) => {
      const resp = await fetch(input, init);
      if (init?.method !== "POST" || resp.status >= 300) return resp;
      const body = await resp.text();
      const i = body.indexOf('"entry":');
      return new Response(body.slice(0, i) + mutate(body.slice(i)), { status: resp.status, headers: resp.headers });
    }) as typeof fetch;
  const flipSig = (s: string): string => s.replace(/("sig":"[A-Za-z0-9+/]{10})(.)/, (_, a: string, c: string) => a + (c === "A" ? "B" : "A"));
  const otherPrincipal = (s: string): string => s.replace('"principal":"agent:sdk-test"', '"principal":"agent:sdk-tesx"');
  const cases: [string, (s: string) => string, string][] = [
    ["flipped signature", flipSig, "signature"],
    ["changed principal", otherPrincipal, "signature"],
    ["indented entry", (s) => s.replace('{"action"', '{ "action"'), "encoding"],
  ];
  for (const [name, mutate, check] of cases) {
    const c = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: ledgerd.verifierKey, fetch: tamper(mutate) });
    await assert.rejects(decidePayment(500, undefined, c), (e: unknown) => e instanceof VerificationError && e.check === check, name);
  }
  // A client trusting another key of the same name refuses the ledger's genuine receipts.
  const c = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: otherKey("ledger.example.com/sdk-test") });
  await assert.rejects(decidePayment(500, undefined, c), (e: unknown) => e instanceof VerificationError && e.check === "key");
  await assert.rejects(c.checkpoint(), (e: unknown) => e instanceof VerificationError && e.check === "checkpoint-signature");
});

test("every entry the ledger wrote decodes strictly, verifies, chains by prev and is in the checkpoint's tree", async () => {
  // After the other tests: publications, approval deadlines, decisions of
  // versions 2 and 3, verdicts, consumptions and outcomes of versions 4 and 5.
  const cp = await client.checkpoint();
  assert.ok(cp.size >= 10, `only ${cp.size} entries`);
  const kinds = new Set<string>();
  let prev = "sha256:" + "0".repeat(64);
  for (let i = 0; i < cp.size; i++) {
    const e = await client.entry(i);
    assert.equal(e.prev, prev, `entry ${i}: prev`);
    prev = entryHash(e);
    kinds.add(`${e.version}/${e.kind ?? "-"}`);
    await client.verifyInclusion({ index: i, raw: e.raw }, cp);
  }
  for (const k of ["3/policy_set", "4/approval_config", "3/decision", "2/-", "4/approval", "4/consumption", "4/outcome", "5/outcome"]) {
    assert.ok(kinds.has(k), `no entry of version/kind ${k} among ${[...kinds].join(", ")}`);
  }
});
