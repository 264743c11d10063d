import { test } from "node:test";
import assert from "node:assert/strict";
import { renderPreview, PreviewInputError } from "../src/index.js";
import { corpus, b64 } from "./testutil.js";

interface PreviewCase {
  name: string;
  document_base64: string;
  expect:
    | { preview_base64: string; digest: string; truncated: boolean; pass: number; redacted: number }
    | { refusal: { code: string; pointer: string; key?: boolean } };
}

test("conformance: testdata/conformance/preview.json", (t) => {
  const cases = corpus<PreviewCase>("preview");
  const failures: string[] = [];
  for (const c of cases) {
    let got: unknown;
    try {
      const p = renderPreview(b64(c.document_base64));
      got = { preview_base64: p.json.toString("base64"), digest: p.digest, truncated: p.truncated, pass: p.pass, redacted: p.redacted };
    } catch (e) {
      if (!(e instanceof PreviewInputError)) throw e;
      got = { refusal: { code: e.code, pointer: e.pointer, ...(e.key ? { key: true } : {}) } };
    }
    const want =
      "refusal" in c.expect
        ? { refusal: { code: c.expect.refusal.code, pointer: c.expect.refusal.pointer, ...(c.expect.refusal.key ? { key: true } : {}) } }
        : c.expect;
    try {
      assert.deepEqual(got, want);
    } catch {
      const show = (x: any): string => JSON.stringify(x.preview_base64 ? { ...x, preview: Buffer.from(x.preview_base64, "base64").toString("utf8").slice(0, 300) } : x);
      failures.push(`${c.name}: got ${show(got)}, want ${show(want)}`);
    }
  }
  t.diagnostic(`preview.json: ${cases.length} cases run, ${failures.length} disagree`);
  assert.deepEqual(failures, []);
});

test("preview worked example (docs/approvals.md §3)", () => {
  const p = renderPreview('{"to": "alice@example.com", "amount_minor": 1250, "password": "hunter2"}');
  assert.equal(p.json.toString("utf8"), '{"amount_minor":1250,"password":"[REDACTED]","to":"alice@example.com"}');
  assert.equal(p.digest, "sha256:b72aba324b0bdf5c752fa3dd5edf0a729ecef2cc48413ee47bd3f61e13c28a81");
  assert.equal(p.redacted, 1);
  assert.equal(p.pass, 1);
});
