// The differential test (docs/conformance.md §6): Go's verdict on 10,000
// generated texts (go run ./internal/conformancegen -seed 1 -n 10000), and
// npm's canonicalize as a second oracle on every accepted text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import canonicalize from "canonicalize"; // 5.x: ESM, the default export is the function
import { paramsDigest, DomainError } from "../src/index.js";
import { repoRoot } from "./testutil.js";

const run = promisify(execFile);

interface Line {
  index: number;
  input_base64: string;
  allow_non_integer?: boolean;
  digest?: string;
  size?: number;
  refusal?: string;
  pointer?: string;
  key?: boolean;
}

async function generated(n: number, seed: number): Promise<Line[]> {
  const dir = mkdtempSync(path.join(tmpdir(), "sdkts-diff-"));
  try {
    const out = path.join(dir, "differential.jsonl");
    await run("go", ["run", "./internal/conformancegen", "-seed", String(seed), "-n", String(n), "-o", out], { cwd: repoRoot, timeout: 600_000 });
    return readFileSync(out, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Line);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("differential: Go's verdict on 10,000 generated texts, and npm canonicalize on the accepted ones", { timeout: 600_000 }, async (t) => {
  const n = Number(process.env["LEDGER_DIFFERENTIAL_N"] ?? "10000");
  const lines = await generated(n, Number(process.env["LEDGER_DIFFERENTIAL_SEED"] ?? "1"));
  assert.equal(lines.length, n);
  const failures: string[] = [];
  let accepted = 0;
  let pointerDiffers = 0;
  for (const l of lines) {
    const input = Buffer.from(l.input_base64, "base64");
    try {
      const c = paramsDigest(input, { allowNonInteger: l.allow_non_integer === true });
      if (l.digest !== c.digest || l.size !== c.size) failures.push(`${l.index}: got ${c.digest} ${c.size}, want ${JSON.stringify(l.refusal ?? l.digest)}`);
      accepted++;
      // The second oracle: JSON.parse then canonicalize (it reads numbers as doubles,
      // which the domain makes exact, and keeps the last of repeated names, which the
      // domain refuses).
      const other = canonicalize(JSON.parse(input.toString("utf8")));
      if (other !== c.canonical.toString("utf8")) failures.push(`${l.index}: npm canonicalize writes other bytes`);
      // The canonical form is a fixed point.
      if (!paramsDigest(c.canonical, { allowNonInteger: l.allow_non_integer === true }).canonical.equals(c.canonical)) failures.push(`${l.index}: not a fixed point`);
    } catch (e) {
      if (!(e instanceof DomainError)) throw e;
      if (l.refusal !== e.code) failures.push(`${l.index}: got refusal ${e.code}, want ${JSON.stringify(l.refusal ?? l.digest)}`);
      else if ((l.pointer ?? "") !== e.pointer || (l.key ?? false) !== e.key) pointerDiffers++;
    }
  }
  t.diagnostic(`differential: ${lines.length} texts run, ${accepted} accepted, ${failures.length} disagree, ${pointerDiffers} refusals with another pointer`);
  assert.deepEqual(failures.slice(0, 20), []);
  assert.equal(pointerDiffers, 0);
});
