// Benchmark: the parameter digest of testdata/commit/params-1k.json, against
// npm canonicalize over JSON.parse plus SHA-256 (no strict domain). Run with
// `npm run bench`. Target: within 2x.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import path from "node:path";
import canonicalizeImport from "canonicalize";
import { paramsDigest } from "../src/index.js";

const canonicalize = canonicalizeImport as unknown as (value: unknown) => string | undefined;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const input = readFileSync(path.join(root, "testdata/commit/params-1k.json"));

function bench(name: string, f: () => void): number {
  for (let i = 0; i < 2000; i++) f(); // warm up
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const n = 20000;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) f();
    const ns = Number(process.hrtime.bigint() - t0) / n;
    best = Math.min(best, ns);
  }
  console.log(`${name}: ${(best / 1000).toFixed(2)} µs/op (${input.length} bytes)`);
  return best;
}

const ours = bench("paramsDigest (strict reader + RFC 8785 + SHA-256)", () => {
  paramsDigest(input);
});
const theirs = bench("JSON.parse + canonicalize + SHA-256", () => {
  const text = canonicalize(JSON.parse(input.toString("utf8")))!;
  createHash("sha256").update("ledger/v1/params\n").update(text).digest("hex");
});
console.log(`ratio: ${(ours / theirs).toFixed(2)}x`);
