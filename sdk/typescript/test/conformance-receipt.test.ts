import { test } from "node:test";
import assert from "node:assert/strict";
import { VerifierKey, verifyReceipt, VerificationError, parseEntry, entryHash } from "../src/index.js";
import { corpus, b64, repoFile } from "./testutil.js";

interface ReceiptCase {
  name: string;
  verifier_key: string;
  entry_base64: string;
  checkpoint_base64?: string | null;
  inclusion?: { index: number; tree_size: number; hashes_base64: string[] | null } | null;
  expect: { valid: boolean; check?: string };
}

test("conformance: testdata/conformance/receipt.json", (t) => {
  const cases = corpus<ReceiptCase>("receipt");
  const failures: string[] = [];
  for (const c of cases) {
    let got: { valid: boolean; check?: string };
    try {
      const key = new VerifierKey(c.verifier_key);
      const proof =
        c.checkpoint_base64 == null || c.inclusion == null
          ? undefined
          : {
              checkpoint: b64(c.checkpoint_base64),
              inclusion: { index: c.inclusion.index, treeSize: c.inclusion.tree_size, hashes: (c.inclusion.hashes_base64 ?? []).map(b64) },
            };
      verifyReceipt(key, b64(c.entry_base64), proof);
      got = { valid: true };
    } catch (e) {
      if (!(e instanceof VerificationError)) throw e;
      got = { valid: false, check: e.check };
    }
    try {
      assert.deepEqual(got, c.expect);
    } catch {
      failures.push(`${c.name}: got ${JSON.stringify(got)}, want ${JSON.stringify(c.expect)}`);
    }
  }
  t.diagnostic(`receipt.json: ${cases.length} cases run, ${failures.length} disagree`);
  assert.deepEqual(failures, []);
});

test("the worked example entry (docs/entry.md §4)", () => {
  const raw = repoFile("testdata/entry/example.json");
  const key = new VerifierKey("ledger.example.com/log+cf212548+AZH4G75SSYwtzGM4N1oZem1E5CKzRLXWu82UBy0tGPhx");
  const { entry } = verifyReceipt(key, raw);
  assert.equal(entry.index, 0);
  assert.equal(entry.version, 1);
  assert.match(entryHash(parseEntry(raw)), /^sha256:[0-9a-f]{64}$/);
  for (const f of ["example-v3-decision.json", "example-v3-policy-set.json"]) {
    verifyReceipt(key, repoFile(`testdata/entry/${f}`));
  }
});

test("verifier keys whose base64 holds '+' (split at the first two '+' only, as Go's note does)", () => {
  const k = new VerifierKey("ledger.example.com/sdk-test+2b7fc5cb+AVN3SrFgc7PXi6ke9Y1ig2/J4HUgUv+39YXPMomqJkpz");
  assert.equal(k.id, "ledger.example.com/sdk-test+2b7fc5cb");
  assert.throws(() => new VerifierKey("ledger.example.com/sdk-test+2b7fc5cc+AVN3SrFgc7PXi6ke9Y1ig2/J4HUgUv+39YXPMomqJkpz"), /key hash/);
});
