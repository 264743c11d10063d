// Starts a real ledgerd (the Go binary, built into a temporary directory)
// for the client's tests, on loopback, and stops it.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { repoRoot } from "./testutil.js";

const run = promisify(execFile);

export interface Ledgerd {
  url: string;
  token: string;
  verifierKey: string;
  /** An approver of make_payment, and their password (random, per run). */
  approver: { name: string; password: string };
  /** Stops ledgerd (SIGTERM, then waits for it to exit) and starts it again on the same data directory and address. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface LedgerdOptions {
  /** The catalog directory. Default: the repository's testdata/declarations. */
  catalogDir?: string;
  /** The policy directory. Default: the repository's testdata/policies. */
  policyDir?: string;
}

let built: Promise<string> | undefined;

/** Builds cmd/ledgerd once per process (or uses $LEDGERD_BIN). */
export function ledgerdBinary(): Promise<string> {
  if (process.env["LEDGERD_BIN"]) return Promise.resolve(process.env["LEDGERD_BIN"]);
  built ??= (async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sdkts-ledgerd-"));
    const bin = path.join(dir, "ledgerd");
    await run("go", ["build", "-o", bin, "./cmd/ledgerd"], { cwd: repoRoot, timeout: 600_000 });
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    return bin;
  })();
  return built;
}

/** Starts ledgerd with the repository's catalog and policies (or those of options) and approvals on. */
export async function startLedgerd(options: LedgerdOptions = {}): Promise<Ledgerd> {
  const bin = await ledgerdBinary();
  const dir = mkdtempSync(path.join(tmpdir(), "sdkts-data-"));
  const data = path.join(dir, "d");
  const init = await run(bin, ["init", "--data", data, "--name", "ledger.example.com/sdk-test", "--mediator", "m1"], { timeout: 60_000 });
  const out = init.stdout + init.stderr;
  const token = /token[^:]*: ([0-9a-f]{64})/.exec(out)?.[1];
  const verifierKey = /verifier key: (\S+)/.exec(out)?.[1];
  if (token === undefined || verifierKey === undefined) throw new Error("ledgerd init: no token or verifier key in its output");
  const cfgPath = path.join(data, "ledgerd.json");
  const cfg = JSON.parse(readFileSync(cfgPath, "utf8")) as Record<string, unknown>;
  cfg["catalog_dir"] = options.catalogDir ?? path.join(repoRoot, "testdata/declarations");
  cfg["policy_dir"] = options.policyDir ?? path.join(repoRoot, "testdata/policies");
  cfg["approvals"] = { pending_ttl: "1h", execution_ttl: "1h" };
  writeFileSync(cfgPath, JSON.stringify(cfg), { mode: 0o600 });
  const approver = { name: "alice", password: randomBytes(18).toString("base64") };
  await new Promise<void>((resolve, reject) => {
    const p = execFile(bin, ["approver", "add", approver.name, "--actions", "make_payment", "--config", cfgPath], { timeout: 120_000 }, (err) =>
      err ? reject(err) : resolve(),
    );
    p.stdin!.end(approver.password + "\n");
  });
  let served = await serve(bin, cfgPath, "127.0.0.1:0");
  const l: Ledgerd = {
    url: served.url,
    token,
    verifierKey,
    approver,
    async restart() {
      await stopChild(served.child);
      served = await serve(bin, cfgPath, new URL(l.url).host);
      if (served.url !== l.url) throw new Error(`ledgerd restarted on ${served.url}, not ${l.url}`);
    },
    async stop() {
      await stopChild(served.child);
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    },
  };
  return l;
}

/** Runs ledgerd serve on listen and waits for its "serving" line. */
async function serve(bin: string, cfgPath: string, listen: string): Promise<{ child: ChildProcess; url: string }> {
  const child: ChildProcess = spawn(bin, ["serve", "--config", cfgPath, "--listen", listen], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (b: Buffer) => {
    stderr = (stderr + b.toString()).slice(-4000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`ledgerd did not start within 60 s:\n${stderr}`)), 60_000);
    child.stdout!.on("data", (b: Buffer) => {
      text += b.toString();
      const m = /serving \S+ on (http:\/\/127\.0\.0\.1:\d+)/.exec(text);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`ledgerd exited (${code}):\n${stderr}`));
    });
  });
  child.stdout!.resume();
  return { child, url };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
}

/**
 * Signs in as the approver on the approver's page (JSON answers) and gives
 * a verdict on one approval, as docs/approvals.md "With curl" does.
 */
export async function giveVerdict(l: Ledgerd, id: string, verdict: "approve" | "deny"): Promise<void> {
  const headers = { accept: "application/json", origin: l.url, "content-type": "application/x-www-form-urlencoded" };
  const signIn = await fetch(`${l.url}/approvals/sign-in`, {
    method: "POST",
    headers,
    body: new URLSearchParams({ name: l.approver.name, password: l.approver.password }).toString(),
  });
  if (signIn.status !== 200) throw new Error(`sign-in: ${signIn.status} ${await signIn.text()}`);
  const { csrf } = (await signIn.json()) as { csrf: string };
  const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!;
  const page = await fetch(`${l.url}/approvals/${id}`, { headers: { accept: "application/json", cookie } });
  if (page.status !== 200) throw new Error(`approval page: ${page.status} ${await page.text()}`);
  const { preview_digest } = (await page.json()) as { preview_digest: string };
  const v = await fetch(`${l.url}/approvals/${id}/verdict`, {
    method: "POST",
    headers: { ...headers, cookie },
    body: new URLSearchParams({ verdict, preview_digest, csrf, confirm: "yes" }).toString(),
  });
  if (v.status !== 201) throw new Error(`verdict: ${v.status} ${await v.text()}`);
}
