// The payment walkthrough: make_payment decided by ledgerd, 2500.00 EUR
// through a person's approval, then 42.00 EUR allowed outright. Set
// LEDGER_URL (default http://127.0.0.1:8080), LEDGER_TOKEN_FILE and
// LEDGER_VERIFIER_KEY, then: node build/examples/payment.js
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { DeclarationSource, LedgerClient, type Receipt } from "@decisionledger/ledger";

function fail(why: string): never {
  throw new Error(why);
}
const env = (name: string, otherwise?: string): string => process.env[name] || otherwise || fail(`${name} is not set`);
const principal = "agent:example-1";
const action = "make_payment";

async function pay(catalog: DeclarationSource, amountMinor: number): Promise<void> {
  const client = catalog.client;
  const raw = JSON.stringify({ payee: "payee-0001", amount_minor: amountMinor, currency: "EUR", memo: "Invoice 4711" });
  const m = (await catalog.get(action)).minimize(raw, { allowlists: { payees: ["payee-0001"] } });
  const d = await catalog.decide({ principal, action, params: m.params, tiersDigest: m.tiersDigest, attributes: m.attributes, preview: raw });
  console.log(`ledger:   decided ${d.decision} by [${d.policies.join(", ")}] (entry ${d.index})`);
  let outcome = (op: string): Promise<Receipt> => client.outcome(d.index, "succeeded", op);
  if (d.decision === "needs_approval" && d.approval !== undefined) {
    const id = d.approval.id;
    console.log(`ledger:   approval ${id} pending until ${d.approval.pendingDeadline}`);
    console.log(`approver: ${client.baseURL}/approvals/${id}`);
    console.log("mediator: waiting up to 5m for a verdict");
    const st = await client.waitApproval(id, { pollMs: 250, signal: AbortSignal.timeout(5 * 60_000) });
    if (st.state !== "approved") fail(`the approval is ${st.state} (entry ${st.verdictIndex ?? "none"}): not acting`);
    console.log(`ledger:   approved by ${st.approver} (entry ${st.verdictIndex})`);
    const used = await client.consume(id, { action, principal, params: m.params });
    console.log(`ledger:   consumed approval ${id} (entry ${used.index})`);
    outcome = (op) => client.approvalOutcome(id, used.index, "succeeded", op);
  } else if (d.decision !== "allow") {
    fail(`${d.decision} by ${d.policies.join(", ") || "no permitting policy"}: not acting`);
  }
  // The act itself, invented: the payment system's id for the transfer.
  const op = `op-${randomBytes(8).toString("hex")}`;
  console.log(`mediator: acting: paid ${(amountMinor / 100).toFixed(2)} EUR to payee-0001 (operation ${op})`);
  const o = await outcome(op);
  console.log(`ledger:   outcome succeeded, operation ${op} (entry ${o.index})`);
}

try {
  const token = readFileSync(env("LEDGER_TOKEN_FILE"), "utf8").trim();
  const client = new LedgerClient({ baseURL: env("LEDGER_URL", "http://127.0.0.1:8080"), token, verifierKey: env("LEDGER_VERIFIER_KEY") });
  const catalog = new DeclarationSource(client);
  await pay(catalog, 250_000); // above 1000.00: a person approves
  await pay(catalog, 4_200);
} catch (e) {
  console.error(`payment: error: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
}
