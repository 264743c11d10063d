// The hiding commitment (version 2) against a real ledgerd (test/ledgerd.ts:
// the Go binary, the repository's catalog and policies, one approver): the
// receipts and the entries the log serves carry the v2:sha256: commitment
// the SDK made, the disclosure kept as a file opens them, and an approval
// opened on one is consumed only with the same commitment, made again from
// the first call's disclosure.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ApiError, Disclosure, DisclosureError, LedgerClient, type Declaration, type Entry } from "../src/index.js";
import { startLedgerd, giveVerdict, type Ledgerd } from "./ledgerd.js";

let ledgerd: Ledgerd;
let client: LedgerClient;
let decl: Declaration;
let dir: string;
const allowlists = { payees: ["payee-0001"] };
const principal = "agent:sdk-test";

before(async () => {
  ledgerd = await startLedgerd();
  client = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: ledgerd.verifierKey });
  decl = await client.declaration("make_payment");
  dir = mkdtempSync(path.join(tmpdir(), "sdkts-disclosures-"));
}, { timeout: 600_000 });

after(async () => {
  await ledgerd?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function params(amount: number, memo: string): string {
  return JSON.stringify({ payee: "payee-0001", amount_minor: amount, currency: "EUR", memo });
}

function commitmentOf(e: Entry): { digest: string; size: number } {
  return { digest: e.members["params_digest"] as string, size: e.members["params_size"] as number };
}

/** Keeps a disclosure as a workload does: one file, mode 0600, created once. */
function keep(name: string, x: Disclosure): string {
  const p = path.join(dir, name);
  writeFileSync(p, x.serialize(), { mode: 0o600, flag: "wx" });
  assert.equal(statSync(p).mode & 0o777, 0o600);
  return p;
}

test("a decision on a version 2 commitment: the receipt and the served entry carry it, and the kept disclosure opens them", async () => {
  const m = decl.minimize(params(42000, "hiding: opened"), { allowlists, commitmentVersion: 2 });
  const d = await client.decide({ principal, action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes });
  assert.equal(d.decision, "allow");
  assert.match(d.entry.members["params_digest"] as string, /^v2:sha256:[0-9a-f]{64}$/);
  const e = await client.entry(d.index);
  assert.deepEqual(commitmentOf(e), { digest: m.params.digest, size: m.params.size });
  m.disclosure.check(commitmentOf(e));
  m.disclosure.only(["amount_minor"]).check(commitmentOf(e));
  const kept = Disclosure.parse(readFileSync(keep("opened.json", m.disclosure)));
  kept.check(commitmentOf(e));
  assert.deepEqual(kept.params(), m.disclosure.params());
  // Another call's disclosure of the same parameters does not open it.
  const other = decl.minimize(params(42000, "hiding: opened"), { allowlists, commitmentVersion: 2 });
  assert.throws(() => other.disclosure.check(commitmentOf(e)), (err: unknown) => err instanceof DisclosureError && err.code === "commitment_mismatch");
  await client.outcome(d.index, "succeeded", "op-hiding-1");
});

test("two identical calls commit differently; their attributes are the same", async () => {
  const raw = params(42000, "hiding: twice");
  const got: [Disclosure, Entry][] = [];
  for (let i = 0; i < 2; i++) {
    const m = decl.minimize(raw, { allowlists, commitmentVersion: 2 });
    const d = await client.decide({ principal, action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes });
    got.push([m.disclosure, await client.entry(d.index)]);
  }
  const [[x1, e1], [x2, e2]] = got as [[Disclosure, Entry], [Disclosure, Entry]];
  assert.notEqual(e1.members["params_digest"], e2.members["params_digest"]);
  assert.ok(e1.attributes!.equals(e2.attributes!));
  x1.check(commitmentOf(e1));
  x2.check(commitmentOf(e2));
  assert.throws(() => x1.check(commitmentOf(e2)), (err: unknown) => err instanceof DisclosureError && err.code === "commitment_mismatch");
});

test("an approval opened on a version 2 commitment is consumed with the commitment made again from the first call's disclosure, not with fresh openings or version 1", async () => {
  const raw = params(250000, "hiding: approval");
  const m = decl.minimize(raw, { allowlists, commitmentVersion: 2 });
  const d = await client.decide({
    principal,
    action: "make_payment",
    params: m.params,
    tiersDigest: m.tiersDigest,
    attributes: m.attributes,
    preview: JSON.stringify({ payee: "payee-0001", amount_minor: 250000 }),
  });
  assert.equal(d.decision, "needs_approval");
  const id = d.approval!.id;
  assert.deepEqual((await client.approval(id)).params, { digest: m.params.digest, size: m.params.size });
  const file = keep("approval.json", m.disclosure);
  const waiting = client.waitApproval(id, { pollMs: 20, signal: AbortSignal.timeout(60_000) });
  await giveVerdict(ledgerd, id, "approve");
  assert.equal((await waiting).state, "approved");

  // The mediator, later, reads the kept file back.
  const first = Disclosure.parse(readFileSync(file));
  const terms = (p: { digest: string; size: number }) => ({ action: "make_payment", principal, params: p });
  const fresh = decl.minimize(raw, { allowlists, commitmentVersion: 2 });
  const v1 = decl.minimize(raw, { allowlists });
  for (const [what, other] of [["fresh openings", fresh.params], ["the version 1 digest", v1.params]] as const) {
    await assert.rejects(
      client.consume(id, terms(other)),
      (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === "approval_digest_mismatch" && e.term === "params_digest",
      what,
    );
  }
  assert.equal((await client.approval(id)).state, "approved");
  const again = decl.minimize(raw, { allowlists, commitmentVersion: 2, openings: first });
  assert.equal(again.params.digest, m.params.digest);
  const used = await client.consume(id, terms(again.params));
  assert.equal(used.entry.members["params_digest"], m.params.digest);
  first.check(commitmentOf(await client.entry(used.index)));
  await client.approvalOutcome(id, used.index, "succeeded", "op-hiding-2");
  assert.equal((await client.approval(id)).state, "consumed");

  // Erasure: the file deleted, the entries still verify; nothing opens them.
  rmSync(file);
  const e = await client.entry(used.index);
  assert.equal(e.members["params_digest"], m.params.digest);
});
