// Benchmark: the parameter digest of testdata/commit/params-1k.json, against
// npm canonicalize over JSON.parse plus SHA-256 (no strict domain). Run with
// `npm run bench`. Target: within 2x.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import path from "node:path";
import canonicalize from "canonicalize";
import { paramsDigest } from "../src/index.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const input = readFileSync(path.join(root, "testdata/commit/params-1k.json"));

const ours = (): void => {
  paramsDigest(input);
};
const theirs = (): void => {
  const text = canonicalize(JSON.parse(input.toString("utf8")))!;
  createHash("sha256").update("ledger/v1/params\n").update(text).digest("hex");
};

/** ns per call of f over n calls. */
function time(f: () => void, n: number): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f();
  return Number(process.hrtime.bigint() - t0) / n;
}

// Warm up, then alternate the two in rounds (the machine is shared: a
// change of load then hits both alike) and keep each one's best round.
time(ours, 5000);
time(theirs, 5000);
let a = Infinity;
let b = Infinity;
for (let round = 0; round < 20; round++) {
  a = Math.min(a, time(ours, 2000));
  b = Math.min(b, time(theirs, 2000));
}
console.log(`paramsDigest (strict reader + RFC 8785 + SHA-256): ${(a / 1000).toFixed(2)} µs/op (${input.length} bytes)`);
console.log(`JSON.parse + canonicalize + SHA-256: ${(b / 1000).toFixed(2)} µs/op`);
console.log(`ratio: ${(a / b).toFixed(2)}x`);
