"""The frozen list of docs/commitment.md section 2.4.

The code points assigned after Unicode 14.0 and up to 17.0 whose
normalization is not inert: a canonical combining class other than 0, a
canonical decomposition, or a part in another code point's decomposition.
Python 3.11's unicodedata (Unicode 14.0) takes them for unassigned, while
Go's x/text (15.0, 17.0 from Go 1.27) and Node's ICU (17.0) know them, so
NFC would judge a string holding one differently in different languages.
The strict domain refuses such a string as unstable_normalization before
it judges NFC. Go's commit/unstable.go holds the same table, and
testdata/conformance/unicode/unstable.json is the generated list every
implementation is tested against.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["UNICODE_VERSION_FROZEN", "has_unstable_normalization", "normalization_fault"]

#: The Unicode version up to which the list is complete.
UNICODE_VERSION_FROZEN = "17.0.0"

_UNSTABLE = re.compile(
    "[\u0897\u1acf-\u1add\u1ae0-\u1aeb"
    "\U000105c9\U000105d2\U000105da\U000105e4"
    "\U00010d69-\U00010d6d"
    "\U00010efa-\U00010efb\U00010efd-\U00010eff"
    "\U00011382-\U00011385\U0001138b\U0001138e\U00011390-\U00011391"
    "\U000113b8\U000113bb\U000113c2\U000113c5\U000113c7-\U000113c9\U000113ce-\U000113d0"
    "\U00011f41-\U00011f42"
    "\U0001611e-\U00016129\U0001612f"
    "\U00016d63\U00016d67-\U00016d6a"
    "\U0001e08f"
    "\U0001e4ec-\U0001e4ef"
    "\U0001e5ee-\U0001e5ef"
    "\U0001e6e3\U0001e6e6\U0001e6ee-\U0001e6ef\U0001e6f5]"
)


def has_unstable_normalization(s: str) -> bool:
    """Whether s holds a code point of the frozen list."""
    return _UNSTABLE.search(s) is not None


def normalization_fault(s: str) -> str:
    """The strict domain's Unicode rules for a str without lone surrogates:
    "unstable_normalization", "not_nfc", or "" when s is admitted."""
    if s.isascii():
        return ""
    if _UNSTABLE.search(s):
        return "unstable_normalization"
    if not unicodedata.is_normalized("NFC", s):
        return "not_nfc"
    return ""
