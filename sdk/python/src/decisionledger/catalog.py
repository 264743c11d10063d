"""Declarations distributed by ledgerd, cached by definition digest.

ledgerd serves its action catalog (docs/api.md): GET /v1/actions lists
each action with its applied-tiers and definition digests, and
GET /v1/actions/{action} serves the declaration file byte for byte. A
DeclarationSource fetches an action's declaration, checks it (its digests
recomputed and compared with the listing) and keeps it in memory under
its definition digest:

    source = DeclarationSource(client)               # refresh=60.0 seconds
    decl = source.get("make_payment")                # fetched once, then reused
    m = decl.minimize(raw, allowlists={"payees": {"acct-100"}})
    try:
        d = source.decide("agent:accounts-7", decl, m)
    except StaleDeclarationError as e:
        ...  # e.action, e.tiers_digest: the declaration ledgerd no longer holds

The rules:

* get(action) returns the cached declaration while the listing names its
  definition digest. The listing is re-read when it is `refresh` seconds
  old or older, and after every stale refusal; a declaration is fetched
  when none cached has the listed digest, checked against a listing read
  in the same call. A re-read listing drops every cached declaration whose
  digest it no longer names.
* decide and append send the request as the client does, with the
  applied-tiers digest of the declaration it was minimized under. When
  ledgerd refuses it as made under a declaration it does not hold (422
  tiers_mismatch, attributes_not_declared or unknown_action), the source
  drops its declaration of that action, marks the listing for re-reading
  and raises StaleDeclarationError; nothing was recorded.
* Nothing is retried under the new declaration. Minimizing under it is
  the caller's decision: a new declaration may move a field to a tier
  that lets its raw value cross (payload to policy), and the call was
  consented to under the old one.

A source is safe to share between threads; two threads missing the same
declaration at once may both fetch it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .client import Decided, LedgerClient, LedgerHTTPError, Receipt, _checked_declaration
from .declare import Declaration, Minimized

__all__ = ["DeclarationSource", "StaleDeclarationError", "STALE_CODES"]

# ledgerd's refusals of a request minimized under a declaration that is not
# the one in its catalog (cmd/ledgerd/entries.go checks them in this order:
# the action, its attributes, its applied-tiers digest).
STALE_CODES = frozenset({"unknown_action", "attributes_not_declared", "tiers_mismatch"})


class StaleDeclarationError(LedgerHTTPError):
    """ledgerd refused a request minimized under a declaration it does not
    hold: status 422, code tiers_mismatch, attributes_not_declared or
    unknown_action (and the server's message). action, tiers_digest and
    definition_digest name the declaration the request was minimized
    under; the source that raised this has dropped it, and its next get
    fetches the ledger's. Nothing was recorded."""

    def __init__(self, action: str, tiers_digest: str, definition_digest: str, refusal: LedgerHTTPError):
        super().__init__(refusal.status, refusal.code, refusal.message, refusal.term)
        self.action, self.tiers_digest, self.definition_digest = action, tiers_digest, definition_digest
        self.args = (f"{self.args[0]}; the declaration of {action} the request was minimized under "
                     f"(tiers {tiers_digest}, definition {definition_digest}) is not the ledger's: dropped",)


class DeclarationSource:
    """The declarations of one ledgerd's catalog, fetched through client
    and cached by definition digest (see the module's doc for the rules).

    refresh: seconds a listing (GET /v1/actions) is reused; optional,
             default 60; 0 re-reads it on every get.
    clock:   the monotonic clock in seconds; optional, default
             time.monotonic (tests pass their own)."""

    def __init__(self, client: LedgerClient, *, refresh: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        if not refresh >= 0:  # also refuses NaN
            raise ValueError("refresh: a number of seconds, at least 0")
        self.client, self.refresh, self._clock = client, float(refresh), clock
        self._lock = threading.Lock()
        self._listing: dict[str, dict] | None = None
        self._listed_at = 0.0
        self._by_digest: dict[str, Declaration] = {}

    def __repr__(self) -> str:
        return f"DeclarationSource({self.client!r}, refresh={self.refresh})"

    @property
    def cached(self) -> dict[str, str]:
        """The declarations held now, as {action: definition digest}."""
        with self._lock:
            return {d.action: digest for digest, d in self._by_digest.items()}

    def get(self, action: str) -> Declaration:
        """The action's declaration as ledgerd lists it: the cached one
        while the listing (at most refresh seconds old) names its
        definition digest, else fetched and checked. Raises ReceiptError
        if the file's digests are not the listed ones, LedgerHTTPError
        (404 not_found) if ledgerd has no such action."""
        listing, fresh = self._current_listing()
        d = self._cached(action, listing)
        if d is None and not fresh:
            listing = self._read_listing()
            d = self._cached(action, listing)
        if d is not None:
            return d
        d = _checked_declaration(action, self.client._declaration_file(action), listing)
        with self._lock:
            self._by_digest = {k: v for k, v in self._by_digest.items() if v.action != action}
            self._by_digest[d.definition_digest()] = d
        return d

    def stale(self, action: str, minimized: Minimized, err: LedgerHTTPError) -> StaleDeclarationError | None:
        """If err is ledgerd's refusal of a request minimized under a
        declaration it does not hold (STALE_CODES, status 422), drop the
        action's cached declaration, mark the listing for re-reading and
        return the StaleDeclarationError to raise; else None. decide,
        append and LedgerClient.mediate call it; so can a caller posting
        through the client itself."""
        if err.status != 422 or err.code not in STALE_CODES:
            return None
        with self._lock:
            self._by_digest = {k: v for k, v in self._by_digest.items()
                               if v.action != action and k != minimized.definition_digest}
            self._listing = None
        return StaleDeclarationError(action, minimized.tiers_digest, minimized.definition_digest, err)

    def decide(self, principal: str, declaration: Declaration | str, minimized: Minimized, **kwargs: Any) -> Decided:
        """LedgerClient.decide (same arguments), raising
        StaleDeclarationError for a stale declaration."""
        action = declaration.action if isinstance(declaration, Declaration) else declaration
        try:
            return self.client.decide(principal, action, minimized, **kwargs)
        except LedgerHTTPError as e:
            stale = self.stale(action, minimized, e)
            if stale is None:
                raise
            raise stale from e

    def append(self, principal: str, action: str, decision: str, policies: list[str], minimized: Minimized,
               **kwargs: Any) -> Receipt:
        """LedgerClient.append (same arguments), raising
        StaleDeclarationError for a stale declaration."""
        try:
            return self.client.append(principal, action, decision, policies, minimized, **kwargs)
        except LedgerHTTPError as e:
            stale = self.stale(action, minimized, e)
            if stale is None:
                raise
            raise stale from e

    # ------------------------------------------------------------ listing

    def _current_listing(self) -> tuple[dict[str, dict], bool]:
        # The listing and whether it was read by this call.
        with self._lock:
            if self._listing is not None and self._clock() - self._listed_at < self.refresh:
                return self._listing, False
        return self._read_listing(), True

    def _read_listing(self) -> dict[str, dict]:
        at = self._clock()
        listing = self.client.actions()
        with self._lock:
            self._listing, self._listed_at = listing, at
            # A cached declaration is reused while the listing names it.
            self._by_digest = {k: d for k, d in self._by_digest.items()
                               if listing.get(d.action, {}).get("definition_digest") == k}
        return listing

    def _cached(self, action: str, listing: dict[str, dict]) -> Declaration | None:
        listed = listing.get(action)
        if listed is None:
            return None
        with self._lock:
            d = self._by_digest.get(listed.get("definition_digest"))
        return d if d is not None and d.action == action else None
