"""decisionledger: the workload side of the decision ledger in Python.

The commit side (strict JSON, RFC 8785, the parameter digest of version 1
and the hiding commitment of version 2, declarations, minimization,
previews) uses only the standard library; verifying ledgerd's
receipts uses `cryptography` for Ed25519 when it is importable.
"""

from .canonical import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    MAX_SAFE_INTEGER,
    Domain,
    canonicalize,
    canonicalize_value,
    number_to_json,
    parse,
    serialize,
)
from .digest import (
    PARAMS_DOMAIN_SEPARATOR,
    Commitment,
    MalformedDigestError,
    digests_equal,
    params_digest,
    params_digest_value,
    params_digests_equal,
    parse_digest,
    parse_params_digest,
)
from .hiding import (
    Disclosure,
    DisclosureError,
    DisclosureKind,
    Opening,
    OpeningError,
    OpeningSource,
    derived_openings,
    hide,
    random_openings,
)
from .errors import DomainError, Kind, LedgerError
from .declare import Declaration, DeclarationError, Field, Minimized, Tool, tiers_digest
from .project import ProjectionError
from .preview import Preview, PreviewInputError, render as render_preview
from .receipt import (
    Checkpoint,
    ReceiptError,
    VerificationUnavailable,
    VerifierKey,
    ed25519_available,
    entry_hash,
    leaf_hash,
    open_checkpoint,
    parse_entry,
    verify_entry,
    verify_receipt,
)
from .client import (
    ApprovalNotGranted,
    ApprovalState,
    Decided,
    Denied,
    LedgerClient,
    LedgerConnectionError,
    LedgerHTTPError,
    Mediation,
    OpenedApproval,
    Receipt,
    mediated,
)
from .catalog import DeclarationSource, StaleDeclarationError

__all__ = [
    "DEFAULT_MAX_BYTES", "DEFAULT_MAX_DEPTH", "MAX_SAFE_INTEGER", "Domain", "canonicalize",
    "canonicalize_value", "number_to_json", "parse", "serialize",
    "PARAMS_DOMAIN_SEPARATOR", "Commitment", "MalformedDigestError", "digests_equal",
    "params_digest", "params_digest_value", "parse_digest", "params_digests_equal", "parse_params_digest",
    "Disclosure", "DisclosureError", "DisclosureKind", "Opening", "OpeningError", "OpeningSource",
    "derived_openings", "hide", "random_openings",
    "DomainError", "Kind", "LedgerError",
    "Declaration", "DeclarationError", "Field", "Minimized", "Tool", "tiers_digest", "ProjectionError",
    "Preview", "PreviewInputError", "render_preview",
    "Checkpoint", "ReceiptError", "VerificationUnavailable", "VerifierKey", "ed25519_available", "entry_hash",
    "leaf_hash", "open_checkpoint", "parse_entry", "verify_entry", "verify_receipt",
    "ApprovalNotGranted", "ApprovalState", "Decided", "Denied", "LedgerClient", "LedgerConnectionError", "LedgerHTTPError",
    "Mediation", "OpenedApproval", "Receipt", "mediated",
    "DeclarationSource", "StaleDeclarationError",
]
