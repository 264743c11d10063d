"""The README's payment walkthrough in Python: 12,500.00 EUR that a person
approves, then 42.00 EUR the policies allow. Against a ledgerd with the
repository's catalog and policies and an approver (sdk/python/README.md):

    LEDGER_TOKEN_FILE=token LEDGER_VERIFIER_KEY="$VKEY" python3 sdk/python/examples/payment.py

LEDGER_URL defaults to http://127.0.0.1:8080. Exits 1 on any refusal."""

import json
import os
import secrets
import sys

from decisionledger import DeclarationSource, LedgerClient, LedgerError

PRINCIPAL, PAYEE = "agent:accounts-7", "acct-100"


def pay(url, client, source, amount_minor):
    raw = json.dumps({"amount_minor": amount_minor, "currency": "EUR", "payee": PAYEE, "memo": "Invoice 2026-1142"})
    decl = source.get("make_payment")  # fetched from the ledger once, then cached by digest
    m = decl.minimize(raw.encode(), allowlists={"payees": {PAYEE}})
    d = source.decide(PRINCIPAL, decl, m)
    print(f"ledger:   decided {d.decision} by [{', '.join(d.policies)}] (entry {d.receipt.index})")
    if d.decision == "needs_approval":
        a = d.receipt.approval
        print(f"ledger:   approval {a.id} pending until {a.pending_deadline}")
        print(f"approver: {url}/approvals/{a.id}")
        print("mediator: waiting up to 300 s for a verdict")
        st = client.wait_approval(a.id, timeout=300)
        if st.state != "approved":
            sys.exit(f"payment: the approval is {st.state}: not paying")
        print(f"ledger:   approved by {st.verdict_entry['approver']} (entry {st.verdict_index})")
        c = client.consume(a.id, action=decl.action, principal=PRINCIPAL,
                           params_digest=m.params.digest, params_size=m.params.size)
        print(f"ledger:   consumed approval {a.id} (entry {c.index})")
    elif d.decision != "allow":
        sys.exit(f"payment: {d.decision} by [{', '.join(d.policies)}]: not paying")
    op = "op-" + secrets.token_hex(8)  # the act itself, invented: the bank's id for the transfer
    print(f"payment:  paid {amount_minor // 100}.{amount_minor % 100:02d} EUR to {PAYEE} ({op})")
    if d.decision == "needs_approval":
        o = client.outcome(a.id, c.index, "succeeded", op)
    else:
        o = client.decision_outcome(d.receipt.index, "succeeded", op)
    print(f"ledger:   outcome {o.entry['result']}, operation {op} (entry {o.index})")


def main():
    url = os.environ.get("LEDGER_URL", "http://127.0.0.1:8080").rstrip("/")
    if not os.environ.get("LEDGER_TOKEN_FILE") or not os.environ.get("LEDGER_VERIFIER_KEY"):
        print("payment: LEDGER_TOKEN_FILE and LEDGER_VERIFIER_KEY must be set", file=sys.stderr)
        sys.exit(2)
    try:
        with open(os.environ["LEDGER_TOKEN_FILE"]) as f:
            client = LedgerClient(url, f.read().strip(), os.environ["LEDGER_VERIFIER_KEY"])
        source = DeclarationSource(client)
        pay(url, client, source, 1250000)  # above 1,000.00: a person approves
        pay(url, client, source, 4200)     # allowed
    except (LedgerError, OSError) as e:
        sys.exit(f"payment: {e}")


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # each line as it happens, also into a pipe
    main()
