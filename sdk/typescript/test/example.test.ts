// examples/payment.ts run as a user runs it (node build/examples/payment.js,
// a child process) against a real ledgerd; the verdict given on the
// approver's page as a person would. Its lines are checked in order, and
// every entry it names is read back from the ledger and verified.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { LedgerClient, entryHash } from "../src/index.js";
import { startLedgerd, giveVerdict, type Ledgerd } from "./ledgerd.js";

const example = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../examples/payment.js");
let ledgerd: Ledgerd;
let client: LedgerClient;
let dir: string;

before(async () => {
  ledgerd = await startLedgerd();
  client = new LedgerClient({ baseURL: ledgerd.url, token: ledgerd.token, verifierKey: ledgerd.verifierKey });
  dir = mkdtempSync(path.join(tmpdir(), "sdkts-example-"));
  writeFileSync(path.join(dir, "token"), ledgerd.token + "\n", { mode: 0o600 });
}, { timeout: 600_000 });

after(async () => {
  await ledgerd?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** Runs the example; onLine sees each line of its stdout as it comes. */
function runExample(onLine: (line: string) => void): Promise<{ code: number | null; lines: string[]; stderr: string }> {
  const child = spawn(process.execPath, [example], {
    env: { ...process.env, LEDGER_URL: ledgerd.url, LEDGER_TOKEN_FILE: path.join(dir, "token"), LEDGER_VERIFIER_KEY: ledgerd.verifierKey },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let partial = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => {
    const parts = (partial + b.toString()).split("\n");
    partial = parts.pop()!;
    for (const l of parts) {
      lines.push(l);
      onLine(l);
    }
  });
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, lines, stderr })));
}

/** Matches lines against patterns one by one and returns each match's groups. */
function expectLines(lines: string[], patterns: RegExp[]): string[][] {
  assert.equal(lines.length, patterns.length, `lines:\n${lines.join("\n")}`);
  return patterns.map((p, i) => {
    const m = p.exec(lines[i]!);
    assert.ok(m, `line ${i + 1}: ${JSON.stringify(lines[i])} does not match ${p}`);
    return m.slice(1);
  });
}

const ID = "(sha256:[0-9a-f]{64})";
const OP = "(op-[0-9a-f]{16})";

test("examples/payment.ts: 2500.00 EUR approved by a person, consumed, paid, its outcome; then 42.00 EUR allowed and paid", { timeout: 120_000 }, async () => {
  const verdicts: Promise<void>[] = [];
  const run = await runExample((line) => {
    const m = /^approver: (.*)\/approvals\/(sha256:[0-9a-f]{64})$/.exec(line);
    if (m) verdicts.push(giveVerdict(ledgerd, m[2]!, "approve"));
  });
  await Promise.all(verdicts);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stderr, "");
  const url = ledgerd.url.replace(/[.]/g, "\\.");
  const g = expectLines(run.lines, [
    /^ledger: {3}decided needs_approval by \[payments\.approval-above-threshold\] \(entry (\d+)\)$/,
    new RegExp(`^ledger: {3}approval ${ID} pending until (\\S+)$`),
    new RegExp(`^approver: ${url}/approvals/${ID}$`),
    /^mediator: waiting up to 5m for a verdict$/,
    /^ledger: {3}approved by alice \(entry (\d+)\)$/,
    new RegExp(`^ledger: {3}consumed approval ${ID} \\(entry (\\d+)\\)$`),
    new RegExp(`^mediator: acting: paid 2500\\.00 EUR to payee-0001 \\(operation ${OP}\\)$`),
    new RegExp(`^ledger: {3}outcome succeeded, operation ${OP} \\(entry (\\d+)\\)$`),
    /^ledger: {3}decided allow by \[payments\.allow-known-payee\] \(entry (\d+)\)$/,
    new RegExp(`^mediator: acting: paid 42\\.00 EUR to payee-0001 \\(operation ${OP}\\)$`),
    new RegExp(`^ledger: {3}outcome succeeded, operation ${OP} \\(entry (\\d+)\\)$`),
  ]);
  const group = (line: number, i = 0): string => g[line]![i]!;
  const [a, id1, deadline, id2, v, id3, c, op1, op1b, o1, b, op2, op2b, o2] = [
    group(0), group(1), group(1, 1), group(2), group(4), group(5), group(5, 1), group(6), group(7), group(7, 1), group(8), group(9), group(10), group(10, 1),
  ];
  assert.equal(id2, id1);
  assert.equal(id3, id1);
  assert.equal(op1b, op1);
  assert.equal(op2b, op2);
  assert.ok(Date.parse(deadline) > Date.now(), "the pending deadline is ahead");

  // The ledger holds what the example printed, each entry verified with the log's key.
  const at = async (i: string) => client.entry(Number(i));
  const request = await at(a);
  assert.deepEqual([request.version, request.kind, request.members["decision"], request.members["action"], request.members["principal"]], [3, "decision", "needs_approval", "make_payment", "agent:example-1"]);
  assert.equal(entryHash(request), id1, "the approval's id is the request's entry hash");
  const verdict = await at(v);
  assert.deepEqual([verdict.version, verdict.kind, verdict.members["approval"], verdict.members["verdict"], verdict.members["approver"]], [4, "approval", id1, "approve", "alice"]);
  const consumption = await at(c);
  assert.deepEqual([consumption.version, consumption.kind, consumption.members["approval"], consumption.members["request"]], [4, "consumption", id1, Number(a)]);
  assert.equal(consumption.members["params_digest"], request.members["params_digest"]);
  const out1 = await at(o1);
  assert.deepEqual([out1.version, out1.kind, out1.members["approval"], out1.members["consumption"], out1.members["result"], out1.members["operation_id"]], [4, "outcome", id1, Number(c), "succeeded", op1]);
  const allowed = await at(b);
  assert.deepEqual([allowed.version, allowed.kind, allowed.members["decision"], allowed.members["action"]], [3, "decision", "allow", "make_payment"]);
  const out2 = await at(o2);
  assert.deepEqual([out2.version, out2.kind, out2.members["decision"], out2.members["result"], out2.members["operation_id"]], [5, "outcome", Number(b), "succeeded", op2]);
  assert.equal((await client.approval(id1)).state, "consumed");
});

test("examples/payment.ts exits 1 and does not act when the approver denies", { timeout: 120_000 }, async () => {
  let id = "";
  const verdicts: Promise<void>[] = [];
  const run = await runExample((line) => {
    const m = /^approver: .*\/approvals\/(sha256:[0-9a-f]{64})$/.exec(line);
    if (m) verdicts.push(giveVerdict(ledgerd, (id = m[1]!), "deny"));
  });
  await Promise.all(verdicts);
  assert.equal(run.code, 1);
  assert.equal(run.lines.at(-1), "mediator: waiting up to 5m for a verdict");
  assert.ok(!run.lines.some((l) => l.startsWith("mediator: acting")), "no act");
  const m = /^payment: error: the approval is denied \(entry (\d+)\): not acting\n$/.exec(run.stderr);
  assert.ok(m, run.stderr);
  const verdict = await client.entry(Number(m[1]));
  assert.deepEqual([verdict.kind, verdict.members["approval"], verdict.members["verdict"]], ["approval", id, "deny"]);
  assert.equal((await client.approval(id)).state, "denied");
});
