// The client and the entry decoder with version 2 (hiding) parameter
// digests, against the fake ledger of fakeledger.ts (entries signed with
// its own key, verified by the client as a real ledgerd's), which can
// also send receipts a real ledgerd would not: a digest re-spelled,
// another size. test/ledgerd-hiding.test.ts runs a real ledgerd.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Declaration, EntryError, LedgerClient, parseEntry, VerificationError, type JsonInput } from "../src/index.js";
import { canonicalizeValue } from "../src/index.js";
import { fakeLedger } from "./fakeledger.js";
import { repoFile } from "./testutil.js";

const payment = repoFile("testdata/calls/make_payment.json");
const decl = Declaration.parse(repoFile("testdata/declarations/make_payment.json"));
const allowlists = { payees: ["payee-0001"] };

function client(f: ReturnType<typeof fakeLedger>): LedgerClient {
  return new LedgerClient({ baseURL: "http://ledger.example.com", token: "t", verifierKey: f.verifierKey, fetch: f.fetch, maxAttempts: 1 });
}

test("decide sends the version 2 commitment the minimization produced and verifies the receipt recording it; consume sends the retried call's", async () => {
  const f = fakeLedger();
  const c = client(f);
  const m = decl.minimize(payment, { allowlists, commitmentVersion: 2 });
  const d = await c.decide({ principal: "agent:sdk-test", action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes });
  assert.equal(d.entry.members["params_digest"], m.params.digest);
  assert.equal(d.entry.members["params_size"], m.params.size);
  const sent = JSON.parse(f.requests[0]!.body) as Record<string, unknown>;
  assert.equal(sent["params_digest"], m.params.digest);
  assert.match(sent["params_digest"] as string, /^v2:sha256:/);
  // Nothing of the disclosure travels: no opening, no raw value.
  const opening = (JSON.parse(m.disclosure.serialize().toString("utf8")) as { fields: Record<string, { opening: string }> }).fields["payee"]!.opening;
  for (const r of f.requests) {
    assert.ok(!r.body.includes(opening), "an opening was sent");
    assert.ok(!r.body.includes("Invoice 4711"), "the memo was sent");
  }

  // The retried call re-committed with the first call's disclosure: the same terms.
  const again = decl.minimize(payment, { allowlists, commitmentVersion: 2, openings: m.disclosure });
  const id = "sha256:" + "3".repeat(64);
  const used = await c.consume(id, { action: "make_payment", principal: "agent:sdk-test", params: again.params });
  assert.equal(used.entry.members["params_digest"], m.params.digest);
  assert.equal((JSON.parse(f.requests[1]!.body) as Record<string, unknown>)["params_digest"], m.params.digest);

  // Version 1 stays what it was.
  const v1 = decl.minimize(payment, { allowlists });
  const d1 = await c.decide({ principal: "agent:sdk-test", action: "make_payment", params: v1.params, tiersDigest: v1.tiersDigest, attributes: v1.attributes });
  assert.equal(d1.entry.members["params_digest"], v1.params.digest);
});

test("a receipt recording the digest in the other version's spelling, or another size, is refused", async () => {
  const m = decl.minimize(payment, { allowlists, commitmentVersion: 2 });
  const req = { principal: "agent:sdk-test", action: "make_payment", params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes };
  const edits: [string, (e: Record<string, JsonInput>) => void][] = [
    ["version 1 spelling of the same hex", (e) => (e["params_digest"] = (e["params_digest"] as string).slice(3))],
    ["another size", (e) => (e["params_size"] = m.params.size + 1)],
  ];
  for (const [name, mutate] of edits) {
    const f = fakeLedger();
    f.mutate = mutate;
    await assert.rejects(client(f).decide(req), (e: unknown) => e instanceof VerificationError && e.check === "receipt", name);
  }
  // And the reverse: a version 1 request recorded as version 2.
  const v1 = decl.minimize(payment, { allowlists });
  const f = fakeLedger();
  f.mutate = (e) => (e["params_digest"] = "v2:" + (e["params_digest"] as string));
  await assert.rejects(
    client(f).decide({ ...req, params: v1.params, tiersDigest: v1.tiersDigest, attributes: v1.attributes }),
    (e: unknown) => e instanceof VerificationError && e.check === "receipt",
  );
});

test("an approval's state with a version 2 params digest is read; one spelled neither way is refused", async () => {
  const f = fakeLedger();
  const c = client(f);
  const id = "sha256:" + "4".repeat(64);
  const digest = "v2:sha256:" + "5".repeat(64);
  f.approvalState = { state: "pending", params_digest: digest, params_size: 310 };
  const st = await c.approval(id);
  assert.deepEqual(st.params, { digest, size: 310 });
  for (const bad of ["v2:sha256:" + "5".repeat(63), "x" + digest, 7]) {
    f.approvalState = { state: "pending", params_digest: bad, params_size: 310 };
    await assert.rejects(c.approval(id), (e: unknown) => e instanceof VerificationError && e.check === "receipt", String(bad));
  }
});

test("entries decode a params_digest of either version, spelled exactly", () => {
  const entry = (digest: string): Buffer => {
    const e: Record<string, JsonInput> = {
      action: "make_payment",
      attributes: {},
      decision: "allow",
      definition_digest: "sha256:" + "1".repeat(64),
      index: 1,
      key_id: "ledger.example.com/log+cf212548",
      kind: "decision",
      mediator: "m1",
      origin: "ledger.example.com/log",
      params_digest: digest,
      params_size: 310,
      policies: [],
      policy_errors: [],
      policy_set: "sha256:" + "2".repeat(64),
      prev: "sha256:" + "0".repeat(64),
      principal: "agent:a",
      sig: "A".repeat(86) + "==",
      tiers_digest: "sha256:" + "3".repeat(64),
      time: "2026-12-03T07:09:52.000000Z",
      version: 3,
    };
    return canonicalizeValue(e);
  };
  const hex = "ab".repeat(32);
  assert.equal(parseEntry(entry("v2:sha256:" + hex)).members["params_digest"], "v2:sha256:" + hex);
  assert.equal(parseEntry(entry("sha256:" + hex)).members["params_digest"], "sha256:" + hex);
  for (const bad of ["v3:sha256:" + hex, "V2:sha256:" + hex, "v2:sha256:" + hex.toUpperCase(), "v2:" + hex, "v2:sha256:" + hex.slice(1)]) {
    assert.throws(() => parseEntry(entry(bad)), (e: unknown) => e instanceof EntryError && e.field === "params_digest", bad);
  }
  // Only params_digest has a version 2: the other digests stay sha256: alone.
  const raw = entry("sha256:" + hex).toString("utf8").replace(`"tiers_digest":"sha256:`, `"tiers_digest":"v2:sha256:`);
  assert.throws(() => parseEntry(Buffer.from(raw)), (e: unknown) => e instanceof EntryError && e.field === "tiers_digest");
});
