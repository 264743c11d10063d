// DeclarationSource against a real ledgerd whose catalog is a copy of
// testdata/declarations: the listing's period, the cache by definition
// digest, and a declaration changed under a restart (the catalog is read
// at start only) refused as stale, dropped, and fetched anew.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ApiError, ClientError, Declaration, DeclarationSource, LedgerClient, StaleDeclarationError } from "../src/index.js";
import { startLedgerd, type Ledgerd } from "./ledgerd.js";
import { repoRoot } from "./testutil.js";

let ledgerd: Ledgerd;
let dir: string;
let declFile: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "sdkts-source-"));
  cpSync(path.join(repoRoot, "testdata/declarations"), path.join(dir, "declarations"), { recursive: true });
  cpSync(path.join(repoRoot, "testdata/policies"), path.join(dir, "policies"), { recursive: true });
  declFile = path.join(dir, "declarations/make_payment.json");
  ledgerd = await startLedgerd({ catalogDir: path.join(dir, "declarations"), policyDir: path.join(dir, "policies") });
}, { timeout: 600_000 });

after(async () => {
  await ledgerd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A client whose every request is recorded: method, path and body. */
function recorded(): { client: LedgerClient; calls: { method: string; path: string; body: string | undefined }[]; count: (p: string) => number } {
  const calls: { method: string; path: string; body: string | undefined }[] = [];
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    calls.push({ method: init?.method ?? "GET", path: new URL(String(input)).pathname, body: typeof init?.body === "string" ? init.body : undefined });
    return fetch(input, init);
  }) as typeof fetch;
  const client = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: ledgerd.verifierKey, fetch: f });
  return { client, calls, count: (p) => calls.filter((c) => c.path === p).length };
}

function request(decl: Declaration, amount: number) {
  const m = decl.minimize(JSON.stringify({ payee: "payee-0001", amount_minor: amount, currency: "EUR", memo: "Invoice 4711" }), {
    allowlists: { payees: ["payee-0001"] },
  });
  return { principal: "agent:sdk-test", action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes };
}

/** The tiers_digest member of the last request body sent to path. */
function sentTiers(calls: { path: string; body: string | undefined }[], p: string): unknown {
  const last = calls.filter((c) => c.path === p).at(-1);
  return last?.body === undefined ? undefined : (JSON.parse(last.body) as Record<string, unknown>)["tiers_digest"];
}

test("the listing is read at most every listingSeconds; a declaration is fetched once per definition digest", async () => {
  const { client, count } = recorded();
  let now = 1_000_000;
  const source = new DeclarationSource(client, { now: () => now });
  const first = await source.get("make_payment");
  assert.equal(first.definitionDigest(), Declaration.parse(readFileSync(declFile)).definitionDigest());
  assert.deepEqual([count("/v1/actions"), count("/v1/actions/make_payment")], [1, 1]);
  now += 59_999;
  assert.equal(await source.get("make_payment"), first);
  await source.get("send_email");
  assert.deepEqual([count("/v1/actions"), count("/v1/actions/make_payment"), count("/v1/actions/send_email")], [1, 1, 1]);
  now += 1; // 60 s after the first read: the listing is read again; make_payment is still listed with its digest, so not fetched
  assert.equal(await source.get("make_payment"), first);
  assert.deepEqual([count("/v1/actions"), count("/v1/actions/make_payment")], [2, 1]);
  assert.equal(source.cached("make_payment"), first);

  const every = recorded();
  const eager = new DeclarationSource(every.client, { listingSeconds: 0, now: () => now });
  await eager.get("make_payment");
  await eager.get("make_payment");
  assert.deepEqual([every.count("/v1/actions"), every.count("/v1/actions/make_payment")], [2, 1]);

  await assert.rejects(source.get("no_such_action"), (e: unknown) => e instanceof ClientError && e.code === "unknown_action");
  assert.throws(() => new DeclarationSource(client, { listingSeconds: -1 }), (e: unknown) => e instanceof ClientError && e.code === "bad_option");
});

test("refusals through the source: unknown_action is typed, other refusals pass as they are", async () => {
  const { client } = recorded();
  const source = new DeclarationSource(client);
  const req = request(await source.get("make_payment"), 4200);
  await assert.rejects(source.decide({ ...req, action: "no_such_action" }), (e: unknown) =>
    e instanceof StaleDeclarationError && e.code === "unknown_action" && e.status === 422 && e.action === "no_such_action" && e.definitionDigest === undefined,
  );
  await assert.rejects(source.decide({ ...req, params: { ...req.params, digest: "sha256:00" } }), (e: unknown) =>
    e instanceof ApiError && !(e instanceof StaleDeclarationError) && e.code === "invalid_request" && e.status === 400,
  );
  assert.ok(source.cached("make_payment") !== undefined, "a refusal that is not the catalog's keeps the cache");
});

test("a declaration changed under a restart: the stale one is refused (tiers_mismatch), dropped, and the next call fetches the new one", async () => {
  const { client, calls, count } = recorded();
  const source = new DeclarationSource(client, { now: () => 0 }); // the listing never expires by time: only the refusal makes it read again
  const old = await source.get("make_payment");
  const ok = await source.decide(request(old, 4200));
  assert.equal(ok.decision, "allow");
  assert.equal(sentTiers(calls, "/v1/decide"), old.tiersDigest(), "the applied-tiers digest is sent");

  // An optional payload field: the attributes stay as they were, the applied-tiers digest changes.
  const doc = JSON.parse(readFileSync(declFile, "utf8")) as { fields: Record<string, unknown> };
  doc.fields["reference"] = { type: "string", tier: "payload", optional: true, description: "The payer's own reference." };
  writeFileSync(declFile, JSON.stringify(doc, null, 2) + "\n");
  const changed = Declaration.parse(readFileSync(declFile));
  assert.notEqual(changed.tiersDigest(), old.tiersDigest());
  await ledgerd.restart();

  const before = calls.length;
  const stale = await source.get("make_payment");
  assert.equal(stale, old, "served from the cache");
  assert.equal(calls.length, before, "nothing read: the listing is fresh by the clock");
  await assert.rejects(source.decide(request(stale, 4300)), (e: unknown) =>
    e instanceof StaleDeclarationError &&
    e instanceof ApiError &&
    e.code === "tiers_mismatch" &&
    e.status === 422 &&
    e.action === "make_payment" &&
    e.tiersDigest === old.tiersDigest() &&
    e.definitionDigest === old.definitionDigest() &&
    e.message.includes(old.tiersDigest()),
  );
  assert.equal(sentTiers(calls, "/v1/decide"), old.tiersDigest());
  assert.equal(source.cached("make_payment"), undefined, "the stale declaration is dropped");
  assert.equal(count("/v1/decide"), 2, "no retry by the source");

  const fresh = await source.get("make_payment");
  assert.deepEqual([count("/v1/actions"), count("/v1/actions/make_payment")], [2, 2]);
  assert.equal(fresh.definitionDigest(), changed.definitionDigest());
  assert.equal(fresh.tiersDigest(), changed.tiersDigest());
  const d = await source.decide(request(fresh, 4300));
  assert.equal(d.decision, "allow");
  assert.equal(d.entry.members["tiers_digest"], changed.tiersDigest());
  assert.equal(sentTiers(calls, "/v1/decide"), changed.tiersDigest());

  // An append attesting the old digest is refused as stale too; the source drops what it holds for the action,
  // so the next call fetches the declaration again though the listing has not changed.
  await assert.rejects(source.append({ ...request(old, 4400), decision: "allow", policies: ["example.allow"] }), (e: unknown) =>
    e instanceof StaleDeclarationError && e.code === "tiers_mismatch" && e.tiersDigest === old.tiersDigest() && e.definitionDigest === undefined,
  );
  assert.equal(sentTiers(calls, "/v1/entries"), old.tiersDigest());
  assert.equal(source.cached("make_payment"), undefined);
  const again = await source.get("make_payment");
  assert.deepEqual([count("/v1/actions"), count("/v1/actions/make_payment")], [3, 3]);
  assert.equal(again.definitionDigest(), changed.definitionDigest());
});
