import { test } from "node:test";
import assert from "node:assert/strict";
import { paramsDigest, DomainError } from "../src/index.js";
import { corpus, b64 } from "./testutil.js";

interface Refusal {
  code: string;
  pointer: string;
  key?: boolean;
}
interface DigestCase {
  name: string;
  input_base64: string;
  allow_non_integer?: boolean;
  expect: { digest: string; size: number; canonical_base64: string } | { refusal: Refusal };
}

test("conformance: testdata/conformance/digest.json", (t) => {
  const cases = corpus<DigestCase>("digest");
  const failures: string[] = [];
  for (const c of cases) {
    const opts = { allowNonInteger: c.allow_non_integer === true };
    let got: unknown;
    try {
      const r = paramsDigest(b64(c.input_base64), opts);
      got = { digest: r.digest, size: r.size, canonical_base64: r.canonical.toString("base64") };
    } catch (e) {
      if (!(e instanceof DomainError)) throw e;
      got = { refusal: { code: e.code, pointer: e.pointer, ...(e.key ? { key: true } : {}) } };
    }
    const want = "refusal" in c.expect ? { refusal: { code: c.expect.refusal.code, pointer: c.expect.refusal.pointer, ...(c.expect.refusal.key ? { key: true } : {}) } } : c.expect;
    try {
      assert.deepEqual(got, want);
    } catch {
      failures.push(`${c.name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  }
  t.diagnostic(`digest.json: ${cases.length} cases run, ${failures.length} disagree`);
  assert.deepEqual(failures, []);
});
