import { test } from "node:test";
import assert from "node:assert/strict";
import { Declaration, DeclarationError } from "../src/index.js";
import { corpus, b64 } from "./testutil.js";

interface MinimizeCase {
  name: string;
  declaration: unknown;
  params_base64: string;
  allowlists?: Record<string, string[]>;
  expect:
    | { params_digest: string; params_size: number; attributes_base64: string; tiers_digest: string; definition_digest: string }
    | { refusal: { code: string; pointer: string } };
}

test("conformance: testdata/conformance/minimize.json", (t) => {
  const cases = corpus<MinimizeCase>("minimize");
  const failures: string[] = [];
  for (const c of cases) {
    let got: unknown;
    try {
      const d = Declaration.parse(JSON.stringify(c.declaration));
      const r = d.minimize(b64(c.params_base64), c.allowlists === undefined ? {} : { allowlists: c.allowlists });
      got = {
        params_digest: r.params.digest,
        params_size: r.params.size,
        attributes_base64: r.attributes.toString("base64"),
        tiers_digest: r.tiersDigest,
        definition_digest: d.definitionDigest(),
      };
    } catch (e) {
      if (!(e instanceof DeclarationError)) throw e;
      got = { refusal: { code: e.code, pointer: e.pointer } };
    }
    const want = "refusal" in c.expect ? { refusal: { code: c.expect.refusal.code, pointer: c.expect.refusal.pointer } } : c.expect;
    try {
      assert.deepEqual(got, want);
    } catch {
      failures.push(`${c.name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  }
  t.diagnostic(`minimize.json: ${cases.length} cases run, ${failures.length} disagree`);
  assert.deepEqual(failures, []);
});
