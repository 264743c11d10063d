"""A ledgerd client for workloads and mediators (docs/api.md), on urllib.

Every receipt is verified before it is returned, trusting nothing but the
log's note verifier key: the entry is decoded strictly, signed by that key,
at the index claimed, and records exactly what was sent; a checkpoint and
an inclusion proof, when asked for (wait_checkpoint=True), are checked
too. An answer that does not verify raises ReceiptError; a refusal by the
server raises LedgerHTTPError with its status, code and term.

    client = LedgerClient("http://127.0.0.1:8080", token, vkey)
    decl = client.declaration("make_payment")       # fetched, digests checked
    m = decl.minimize(raw_params, allowlists={"payees": {"acct-100"}})
    d = client.decide("agent:accounts-7", decl, m)
    if d.decision == "allow": ...; client.decision_outcome(d.receipt.index, "succeeded")

Receipt verification needs `cryptography` (Ed25519). Without it, every
call that would return a receipt raises VerificationUnavailable before it
sends anything: nothing unverified is ever returned.
"""

from __future__ import annotations

import functools
import http.client
import inspect
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .canonical import Domain, canonicalize, canonicalize_value, object_members_raw, parse
from .declare import Declaration, Minimized
from .digest import digests_equal, parse_digest, parse_params_digest, MalformedDigestError
from .errors import DomainError, LedgerError
from .preview import render
from .receipt import (ReceiptError, VerificationUnavailable, VerifierKey, ed25519_available, entry_hash,
                      leaf_hash, open_checkpoint, verify_entry, verify_receipt)

if TYPE_CHECKING:
    from .catalog import DeclarationSource
    from .hiding import Disclosure

__all__ = [
    "LedgerClient",
    "LedgerHTTPError",
    "LedgerConnectionError",
    "Receipt",
    "Decided",
    "OpenedApproval",
    "ApprovalState",
    "Denied",
    "ApprovalNotGranted",
    "mediated",
    "Mediation",
]


class LedgerHTTPError(LedgerError):
    """A refusal by ledgerd: the HTTP status, the stable error code, the
    server's message (which names fields, never values) and, for the
    approval lifecycle, the term that differs."""

    def __init__(self, status: int, code: str, message: str, term: str = ""):
        self.status, self.code, self.message, self.term = status, code, message, term
        super().__init__(f"ledgerd: {status} {code}: {message}" + (f" (term {term})" if term else ""))


class LedgerConnectionError(LedgerError):
    """ledgerd could not be reached (or stopped answering), after the
    retries a request allows. Whether a POST was carried out is unknown:
    retry it with the same idempotency key."""


@dataclass(frozen=True)
class OpenedApproval:
    id: str
    pending_deadline: str
    preview_digest: str


@dataclass(frozen=True)
class Receipt:
    """A verified acknowledgement of a durable entry."""

    index: int
    entry: dict            # the entry's members
    raw: bytes             # the signed entry, byte for byte
    replayed: bool = False
    approval: OpenedApproval | None = None
    checkpoint: bytes | None = None  # the signed note covering it, with wait_checkpoint

    @property
    def entry_hash(self) -> str:
        return entry_hash(self.raw)


@dataclass(frozen=True)
class Decided:
    """The ledger's verified decision on a request (POST /v1/decide)."""

    decision: str
    policies: list
    policy_errors: list
    policy_set: str
    receipt: Receipt


@dataclass(frozen=True)
class ApprovalState:
    """GET /v1/approvals/{id}. `state` and the deadlines are the server's
    word; a verdict (approve or deny) is checked against its signed entry
    by wait_approval, which sets verdict_entry."""

    id: str
    state: str
    raw: dict
    verdict_entry: dict | None = None

    def __getattr__(self, name: str) -> Any:
        try:
            return self.raw[name]
        except KeyError:
            raise AttributeError(name) from None


class Denied(LedgerError):
    """@mediated: the ledger denied the call (the receipt says so)."""

    def __init__(self, decided: Decided):
        self.decided = decided
        super().__init__(f"denied by the ledger (entry {decided.receipt.index}, policies {decided.policies})")


class ApprovalNotGranted(LedgerError):
    """@mediated: the approval was denied or expired, or the wait ran out."""

    def __init__(self, state: str, approval_id: str):
        self.state, self.approval_id = state, approval_id
        super().__init__(f"approval {approval_id} is {state}")


_STATES = ("pending", "approved", "denied", "consumed", "expired")


class LedgerClient:
    """Talks to one ledgerd as one mediator (its token)."""

    def __init__(self, base_url: str, token: str, verifier_key: str | VerifierKey, *, timeout: float = 30.0,
                 retry_for: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.key = verifier_key if isinstance(verifier_key, VerifierKey) else VerifierKey.parse(verifier_key)
        self.timeout = timeout
        self.retry_for = retry_for

    def __repr__(self) -> str:  # never the token
        return f"LedgerClient({self.base_url!r}, key={self.key.key_id!r})"

    # ------------------------------------------------------------ HTTP

    def _request(self, method: str, path: str, body: bytes | None = None, idempotency_key: str = "",
                 retry: bool = False) -> tuple[int, bytes, Mapping[str, str]]:
        deadline = time.monotonic() + (self.retry_for if retry else 0)
        delay = 0.05
        while True:
            req = urllib.request.Request(self.base_url + path, data=body, method=method)
            req.add_header("Authorization", "Bearer " + self._token)
            if body is not None:
                req.add_header("Content-Type", "application/json")
            if idempotency_key:
                req.add_header("Idempotency-Key", idempotency_key)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return resp.status, resp.read(), resp.headers
            except urllib.error.HTTPError as e:
                data = e.read()
                if retry and e.code in (429, 503) and time.monotonic() < deadline:
                    wait = _retry_after(e.headers.get("Retry-After"), delay)
                    time.sleep(min(wait, max(0.0, deadline - time.monotonic())))
                    delay = min(delay * 2, 2.0)
                    continue
                raise _api_error(e.code, data) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as e:
                if retry and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                raise LedgerConnectionError(f"ledgerd at {self.base_url}: {type(e).__name__}") from e

    def _get(self, path: str) -> bytes:
        return self._request("GET", path)[1]

    def _post(self, path: str, obj: dict, idempotency_key: str | None) -> tuple[bytes, bool]:
        _need_verify()
        key = idempotency_key or secrets.token_hex(16)
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        status, data, headers = self._request("POST", path, body, key, retry=True)
        return data, headers.get("Idempotent-Replayed") == "true"

    # ------------------------------------------------------------ declarations

    def actions(self) -> dict[str, dict]:
        """GET /v1/actions: each action's tiers and definition digests, by name."""
        doc = _strict(self._get("/v1/actions"), "actions")
        items = doc.get("actions") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ReceiptError("answer", "malformed actions answer: no list at /actions")
        out = {}
        for i, a in enumerate(items):
            if not isinstance(a, dict) or not all(isinstance(a.get(k), str)
                                                  for k in ("action", "tiers_digest", "definition_digest")):
                raise ReceiptError("answer", f"malformed actions answer at /actions/{i}")
            out[a["action"]] = a
        return out

    def declaration(self, action: str) -> Declaration:
        """Fetch an action's declaration (GET /v1/actions/{action}, byte for
        byte), parse it, recompute its applied-tiers and definition digests
        and compare them with GET /v1/actions. Raises ReceiptError if they
        differ (the server serves another declaration than it lists)."""
        raw = self._declaration_file(action)
        return _checked_declaration(action, raw, self.actions())

    def _declaration_file(self, action: str) -> bytes:
        return self._get("/v1/actions/" + urllib.parse.quote(action, safe=""))

    # ------------------------------------------------------------ decide, append

    def decide(self, principal: str, declaration: Declaration | str, minimized: Minimized, *,
               preview: Any = None, idempotency_key: str | None = None, wait_checkpoint: bool = False) -> Decided:
        """POST /v1/decide: the ledger decides and records its decision.
        `preview`, for a needs_approval decision, is the document approvers
        are shown (bytes of JSON text, or a value); its rendered digest is
        checked against the approval opened."""
        action = declaration.action if isinstance(declaration, Declaration) else declaration
        req = _request_body(principal, action, minimized)
        shown = None
        if preview is not None:
            doc = preview if isinstance(preview, (bytes, bytearray)) else json.dumps(preview, ensure_ascii=False).encode()
            shown = render(bytes(doc)).digest
            req["preview"] = _raw_json(bytes(doc))
        path = "/v1/decide" + ("?wait=checkpoint" if wait_checkpoint else "")
        body, replayed = self._post(path, req, idempotency_key)
        members = _members(body)
        try:
            decision = members["decision"][0]
            policies = members["policies"][0]
            errors = members["policy_errors"][0]
            policy_set = members["policy_set"][0]
            parse_digest(policy_set)
        except (KeyError, MalformedDigestError, TypeError):
            raise ReceiptError("answer", "malformed decide answer") from None
        r = self._receipt(members, principal, action, minimized, replayed, shown)
        e = r.entry
        if e["version"] != 3 or e.get("kind") != "decision":
            raise ReceiptError("answer", "the entry is not a decision the ledger made (version 3, kind decision)")
        if e["decision"] != decision or e["policies"] != policies or e["policy_errors"] != errors or \
                e["policy_set"] != policy_set:
            raise ReceiptError("answer", "the answer's decision is not the entry's")
        return Decided(decision, list(policies), list(errors), policy_set, r)

    def append(self, principal: str, action: str, decision: str, policies: list[str], minimized: Minimized, *,
               preview: Any = None, idempotency_key: str | None = None, wait_checkpoint: bool = False) -> Receipt:
        """POST /v1/entries: record a decision the mediator made."""
        req = _request_body(principal, action, minimized)
        req["decision"], req["policies"] = decision, list(policies)
        shown = None
        if preview is not None:
            doc = preview if isinstance(preview, (bytes, bytearray)) else json.dumps(preview, ensure_ascii=False).encode()
            shown = render(bytes(doc)).digest
            req["preview"] = _raw_json(bytes(doc))
        path = "/v1/entries" + ("?wait=checkpoint" if wait_checkpoint else "")
        body, replayed = self._post(path, req, idempotency_key)
        r = self._receipt(_members(body), principal, action, minimized, replayed, shown)
        if r.entry["decision"] != decision or r.entry["policies"] != sorted(policies, key=lambda s: s.encode()):
            raise ReceiptError("answer", "the entry does not record the decision sent")
        return r

    def _receipt(self, members: dict, principal: str, action: str, m: Minimized, replayed: bool,
                 shown: str | None) -> Receipt:
        r = self._signed(members, replayed)
        e = r.entry
        same = e.get("principal") == principal and e.get("action") == action and \
            e.get("params_digest") == m.params.digest and e.get("params_size") == m.params.size and \
            e.get("tiers_digest") == m.tiers_digest and \
            canonicalize(_members(r.raw)["attributes"][1]) == m.attributes
        if not same:
            raise ReceiptError("answer", "the entry does not record the request sent")
        opened = _check_opened(members.get("approval"), r, shown)
        return Receipt(r.index, r.entry, r.raw, replayed, opened, r.checkpoint)

    def _signed(self, members: dict, replayed: bool) -> Receipt:
        try:
            index = members["index"][0]
            raw = members["entry"][1]
        except KeyError:
            raise ReceiptError("answer", "malformed receipt") from None
        if "inclusion" in members:
            inc = members["inclusion"][0]
            try:
                note = inc["checkpoint"].encode("utf-8")
                hashes = [_b64(h) for h in inc["hashes"]]
                size = inc["tree_size"]
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ReceiptError("inclusion", "malformed inclusion proof") from None
            e = verify_receipt(raw, self.key, checkpoint=note, index=index, tree_size=size, hashes=hashes)
        else:
            note = None
            e = verify_entry(raw, self.key)
            if e["index"] != index:
                raise ReceiptError("index", "the receipt's index is not its entry's")
        if "leaf_hash" in members and members["leaf_hash"][0] != leaf_hash(raw).hex():
            raise ReceiptError("answer", "the receipt's leaf hash is not its entry's")
        return Receipt(index, e, raw, replayed, None, note)

    # ------------------------------------------------------------ approvals

    def approval(self, approval_id: str) -> ApprovalState:
        """GET /v1/approvals/{id}: the server's account of an approval."""
        parse_digest(approval_id)
        doc = _strict(self._get("/v1/approvals/" + approval_id), "approval")
        if doc.get("id") != approval_id:
            raise ReceiptError("answer", "the approval answered is another")
        if doc.get("state") not in _STATES:
            raise ReceiptError("answer", "unknown approval state")
        return ApprovalState(doc["id"], doc["state"], doc)

    def wait_approval(self, approval_id: str, *, timeout: float = 60.0, poll: float = 0.2) -> ApprovalState:
        """Poll until the approval is no longer pending or timeout seconds
        pass (then the pending state is returned). A verdict is checked
        against its signed entry (a version 4 approval entry of this
        approval with the state's verdict) and set as verdict_entry."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                st = self.approval(approval_id)
                if st.state != "pending":
                    return self._check_verdict(st)
            except LedgerHTTPError as e:
                if e.status not in (404, 429, 503) or e.code == "approval_not_found":
                    raise
            except LedgerConnectionError:
                pass
            if time.monotonic() >= deadline:
                return self.approval(approval_id)
            time.sleep(poll)

    def _check_verdict(self, st: ApprovalState) -> ApprovalState:
        want = st.raw.get("verdict", "")
        if st.state in ("approved", "consumed") and want != "approve":
            raise ReceiptError("answer", f"an approval {st.state} without the verdict approve")
        if st.state == "denied" and want != "deny":
            raise ReceiptError("answer", "an approval denied without the verdict deny")
        if st.state == "expired" and not want:
            return st
        e = self.entry(st.raw["verdict_index"])
        if e.get("version") != 4 or e.get("kind") != "approval" or e.get("approval") != st.id or \
                e.get("verdict") != want:
            raise ReceiptError("answer", "the verdict's entry is not this approval's verdict")
        return ApprovalState(st.id, st.state, st.raw, e)

    def consume(self, approval_id: str, *, action: str, principal: str, params_digest: str, params_size: int,
                idempotency_key: str | None = None) -> Receipt:
        """POST /v1/approvals/{id}/consume with the request's terms; the
        receipt is a verified consumption of this approval with them.
        params_digest is the commitment of the call approved, of either
        version ("sha256:" or "v2:sha256:"; a retried version 2 call
        commits again with the first call's Disclosure as its openings).
        A malformed one raises MalformedDigestError before anything is
        sent."""
        parse_params_digest(params_digest)
        body, replayed = self._post(f"/v1/approvals/{approval_id}/consume",
                                    {"action": action, "principal": principal, "params_digest": params_digest,
                                     "params_size": params_size}, idempotency_key)
        r = self._signed(_members(body), replayed)
        e = r.entry
        if e["version"] != 4 or e.get("kind") != "consumption" or e.get("approval") != approval_id:
            raise ReceiptError("answer", "the entry is not a consumption of this approval")
        if e["action"] != action or e["principal"] != principal or e["params_digest"] != params_digest or \
                e["params_size"] != params_size:
            raise ReceiptError("answer", "the consumption does not record the terms sent")
        return r

    def outcome(self, approval_id: str, consumption: int, result: str, operation_id: str = "", *,
                idempotency_key: str | None = None) -> Receipt:
        """POST /v1/approvals/{id}/outcome: what became of a consumed act."""
        req: dict[str, Any] = {"consumption": consumption, "result": result}
        if operation_id:
            req["operation_id"] = operation_id
        body, replayed = self._post(f"/v1/approvals/{approval_id}/outcome", req, idempotency_key)
        r = self._signed(_members(body), replayed)
        e = r.entry
        if e["version"] != 4 or e.get("kind") != "outcome" or e.get("approval") != approval_id or \
                e.get("consumption") != consumption or e.get("result") != result or \
                e.get("operation_id", "") != operation_id:
            raise ReceiptError("answer", "the entry does not record the outcome sent")
        return r

    def decision_outcome(self, decision_index: int, result: str, operation_id: str = "", *,
                         idempotency_key: str | None = None) -> Receipt:
        """POST /v1/entries/{index}/outcome: what became of an allowed act."""
        req: dict[str, Any] = {"result": result}
        if operation_id:
            req["operation_id"] = operation_id
        body, replayed = self._post(f"/v1/entries/{decision_index}/outcome", req, idempotency_key)
        r = self._signed(_members(body), replayed)
        e = r.entry
        if e["version"] != 5 or e.get("kind") != "outcome" or e.get("decision") != decision_index or \
                e.get("result") != result or e.get("operation_id", "") != operation_id:
            raise ReceiptError("answer", "the entry does not record the outcome sent")
        return r

    # ------------------------------------------------------------ mediation

    def mediate(self, principal: str, declaration: Declaration | DeclarationSource, raw: bytes, *,
                action: str = "", allowlists: Mapping[str, Any] | None = None, preview: Any = None,
                approval_timeout: float = 0.0, hiding: bool = False, openings: Any = None,
                on_disclosure: Callable[["Disclosure"], Any] | None = None) -> "Mediation":
        """One mediated call as a context manager; see Mediation."""
        return Mediation(self, principal, declaration, raw, action=action, allowlists=allowlists, preview=preview,
                         approval_timeout=approval_timeout, hiding=hiding, openings=openings,
                         on_disclosure=on_disclosure)

    # ------------------------------------------------------------ reads

    def entry(self, index: int) -> dict:
        """GET /v1/entries/{index}, verified (signed by the key, at index)."""
        _need_verify()
        raw = self._get(f"/v1/entries/{index}")
        e = verify_entry(raw, self.key)
        if e["index"] != index:
            raise ReceiptError("index", "the entry served is at another index")
        return e

    def checkpoint(self) -> bytes:
        """GET /v1/checkpoint, opened with the key (the note's bytes)."""
        _need_verify()
        note = self._get("/v1/checkpoint")
        open_checkpoint(note, self.key)
        return note


# ---------------------------------------------------------------- helpers

def _checked_declaration(action: str, raw: bytes, listing: Mapping[str, dict]) -> Declaration:
    # A declaration file as served, parsed, its digests recomputed and
    # compared with those GET /v1/actions listed.
    d = Declaration.parse(raw)
    listed = listing.get(action)
    if d.action != action or listed is None:
        raise ReceiptError("declaration", "the declaration served is not the action's")
    try:
        same = digests_equal(d.tiers_digest(), listed["tiers_digest"]) and \
            digests_equal(d.definition_digest(), listed["definition_digest"])
    except (MalformedDigestError, KeyError):
        same = False
    if not same:
        raise ReceiptError("declaration", "the declaration's digests are not those GET /v1/actions lists")
    return d


def _need_verify() -> None:
    if not ed25519_available():
        raise VerificationUnavailable()


def _retry_after(v: str | None, default: float) -> float:
    try:
        return max(0.0, float(v)) if v is not None else default
    except ValueError:
        return default


def _api_error(status: int, body: bytes) -> LedgerHTTPError:
    try:
        e = json.loads(body)["error"]
        return LedgerHTTPError(status, str(e.get("code", "")), str(e.get("message", "")), str(e.get("term", "")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return LedgerHTTPError(status, "", "an answer that is not a ledgerd error")


def _strict(body: bytes, what: str) -> Any:
    try:
        return parse(body)
    except DomainError as e:
        raise ReceiptError("answer", f"malformed {what} answer: {e.kind} at {e.pointer!r}") from None


def _members(body: bytes) -> dict:
    try:
        return object_members_raw(body)
    except DomainError as e:
        raise ReceiptError("answer", f"malformed answer: {e.kind} at {e.pointer!r}") from None


def _raw_json(doc: bytes) -> Any:
    # The preview document travels as the value it is, read strictly (it
    # rendered here already, so it is inside the domain).
    return parse(doc, Domain(max_bytes=1 << 20))


def _request_body(principal: str, action: str, m: Minimized) -> dict:
    return {"principal": principal, "action": action, "params_digest": m.params.digest,
            "params_size": m.params.size, "tiers_digest": m.tiers_digest, "attributes": parse(m.attributes)}


def _b64(s: str) -> bytes:
    import base64
    return base64.b64decode(s, validate=True)


def _check_opened(raw: tuple | None, r: Receipt, shown: str | None) -> OpenedApproval | None:
    e = r.entry
    if raw is None:
        if shown is not None and e.get("decision") == "needs_approval":
            raise ReceiptError("answer", "a needs_approval decision sent with a preview opened no approval")
        return None
    if e.get("decision") != "needs_approval":
        raise ReceiptError("answer", "a decision other than needs_approval names an approval")
    a = raw[0]
    try:
        opened = OpenedApproval(a["id"], a["pending_deadline"], a["preview_digest"])
        parse_digest(opened.preview_digest)
    except (KeyError, TypeError, MalformedDigestError):
        raise ReceiptError("answer", "malformed approval") from None
    if opened.id != entry_hash(r.raw):
        raise ReceiptError("answer", "the approval's id is not the entry hash of the decision")
    if not opened.pending_deadline > e["time"]:
        raise ReceiptError("answer", "the approval's pending deadline is not after the decision's time")
    if shown is not None and opened.preview_digest != shown:
        raise ReceiptError("answer", "the approval's preview digest is not that of the preview sent")
    if opened.preview_digest == "sha256:" + "0" * 64:
        raise ReceiptError("answer", "the approval has no preview digest")
    return opened


# ---------------------------------------------------------------- mediation

class Mediation:
    """One mediated call as a context manager (LedgerClient.mediate):

        with client.mediate("agent:mail-1", decl, raw, allowlists=lists) as call:
            send(...)                      # runs only if the ledger allows it
            call.operation_id = "msg-17"   # optional: the downstream id

    Entering decides (and, for needs_approval with approval_timeout > 0,
    waits for the verdict and consumes the approval with the request's
    terms); Denied or ApprovalNotGranted is raised there, before the body
    runs. Leaving records the outcome: succeeded, or failed if the body
    raised (the exception goes on).

    `declaration` is the action's Declaration, or a DeclarationSource
    (catalog.py) with action= naming the action: entering then takes the
    source's declaration, and a refusal of it as stale drops it from the
    source and raises StaleDeclarationError (nothing is retried).

    hiding=True commits with version 2 (Declaration.minimize's hiding and
    openings): the request and the consumption carry the "v2:sha256:"
    commitment, and call.minimized.disclosure, which opens it, is the
    caller's to keep (Disclosure.write) before leaving the block.
    on_disclosure(disclosure), with hiding=True, is called with it on
    entering, after minimization and before anything is sent: the
    disclosure of every entry the call records is handed over first, and
    if on_disclosure raises, nothing is sent and nothing is recorded (the
    exception goes on)."""

    def __init__(self, client: "LedgerClient", principal: str, declaration: Declaration | DeclarationSource,
                 raw: bytes, *, action: str = "", allowlists: Mapping[str, Any] | None = None, preview: Any = None,
                 approval_timeout: float = 0.0, hiding: bool = False, openings: Any = None,
                 on_disclosure: Callable[["Disclosure"], Any] | None = None):
        if on_disclosure is not None and not hiding:
            raise ValueError("on_disclosure: there is a disclosure only with hiding=True")
        if isinstance(declaration, Declaration):
            if action and action != declaration.action:
                raise ValueError("action: not the declaration's action")
            self.source, self.action, self.declaration = None, declaration.action, declaration
        else:
            if not action:
                raise TypeError("Mediation: a declaration source needs action=")
            self.source, self.action = declaration, action
            self.declaration: Declaration | None = None  # the source's, on entering
        self.client, self.principal = client, principal
        self.raw, self.allowlists, self.preview, self.approval_timeout = raw, allowlists, preview, approval_timeout
        self.hiding, self.openings, self.on_disclosure = hiding, openings, on_disclosure
        self.minimized: Minimized | None = None
        self.decided: Decided | None = None
        self.consumption: Receipt | None = None
        self.outcome: Receipt | None = None
        self.operation_id = ""

    def __enter__(self) -> "Mediation":
        c = self.client
        if self.source is not None:
            self.declaration = self.source.get(self.action)
        decl = self.declaration
        m = self.minimized = decl.minimize(self.raw, allowlists=self.allowlists, hiding=self.hiding,
                                           openings=self.openings)
        if self.on_disclosure is not None:
            self.on_disclosure(m.disclosure)
        try:
            d = self.decided = c.decide(self.principal, decl, m, preview=self.preview)
        except LedgerHTTPError as e:
            stale = self.source.stale(decl.action, m, e) if self.source is not None else None
            if stale is None:
                raise
            raise stale from e
        if d.decision == "deny":
            raise Denied(d)
        if d.decision == "needs_approval":
            opened = d.receipt.approval
            if opened is None or self.approval_timeout <= 0:
                raise ApprovalNotGranted("pending", opened.id if opened else "")
            st = c.wait_approval(opened.id, timeout=self.approval_timeout)
            if st.state != "approved":
                raise ApprovalNotGranted(st.state, opened.id)
            self.consumption = c.consume(opened.id, action=decl.action, principal=self.principal,
                                         params_digest=m.params.digest, params_size=m.params.size)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        result = "failed" if exc_type is not None else "succeeded"
        if self.consumption is not None:
            self.outcome = self.client.outcome(self.decided.receipt.approval.id, self.consumption.index, result,
                                               self.operation_id)
        else:
            self.outcome = self.client.decision_outcome(self.decided.receipt.index, result, self.operation_id)
        return False


def mediated(action: str, *, client: LedgerClient, principal: str,
             declaration: Declaration | DeclarationSource | None = None,
             allowlists: Mapping[str, Any] | None = None, preview: Callable[[dict], Any] | None = None,
             approval_timeout: float = 0.0, hiding: bool = False,
             on_disclosure: Callable[["Disclosure"], Any] | None = None) -> Callable:
    """Mediate a tool function through the ledger:

        @mediated("send_email", client=c, principal="agent:mail-1")
        def send_email(recipient, subject, body): ...

    Each call's arguments (bound by name) are the raw parameters: they are
    committed to and minimized by the action's declaration (given, taken
    from a DeclarationSource on each call, or else fetched from the ledger
    and checked on each call), and the call runs inside
    LedgerClient.mediate: on allow the function runs and its outcome
    (succeeded, or failed when it raises) is recorded; deny raises Denied
    and the function does not run; needs_approval waits up to
    approval_timeout seconds for a verdict, then consumes the approval and
    runs, or raises ApprovalNotGranted; a refusal of a source's declaration
    as stale raises StaleDeclarationError and the function does not run.
    `preview(params)` may give the document approvers are shown.

    hiding=True commits each call with version 2 under fresh random
    openings and needs on_disclosure: it is given each call's Disclosure
    before anything is sent (see Mediation), and is the only way to it;
    its commitment's digest is the params_digest of the call's entries, a
    name for the file:

        @mediated("make_payment", client=c, principal="agent:accounts-7", hiding=True,
                  on_disclosure=lambda x: x.write(f"/var/lib/agent/disclosures/{x.commitment.digest[10:]}.json"))

    If on_disclosure raises, the function does not run and nothing is
    recorded.
    """
    if hiding and on_disclosure is None:
        raise TypeError("mediated: hiding=True needs on_disclosure= to keep each call's disclosure "
                        "(without it no entry could ever be opened)")
    if on_disclosure is not None and not hiding:
        raise ValueError("mediated: on_disclosure= is for hiding=True")

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            decl = declaration if declaration is not None else client.declaration(action)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            params = dict(bound.arguments)
            # The arguments as JSON, refused with a DomainError naming the
            # argument (a float, bytes, an object) if outside the domain.
            raw = canonicalize_value(params)
            with client.mediate(principal, decl, raw, action=action, allowlists=allowlists,
                                preview=preview(params) if preview else None, approval_timeout=approval_timeout,
                                hiding=hiding, on_disclosure=on_disclosure):
                return fn(*args, **kwargs)

        return call

    return wrap
