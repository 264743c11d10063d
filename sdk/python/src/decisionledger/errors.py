"""Typed errors of the decision ledger SDK.

A refusal names where the fault is and what kind it is, never the offending
value: messages are safe to log.
"""

from __future__ import annotations

__all__ = [
    "LedgerError",
    "DomainError",
    "Kind",
]


class LedgerError(Exception):
    """Base class of every error this package raises on purpose."""


class Kind:
    """The kinds of strict-domain refusal (docs/commitment.md section 2).

    Their strings are part of the specification and equal Go's commit.Kind.
    """

    SYNTAX = "syntax"
    INVALID_UTF8 = "invalid_utf8"
    LONE_SURROGATE = "lone_surrogate"
    DUPLICATE_KEY = "duplicate_key"
    UNSTABLE_NORMALIZATION = "unstable_normalization"
    NOT_NFC = "not_nfc"
    INTEGER_RANGE = "integer_range"
    NON_INTEGER = "non_integer"
    INEXACT_NUMBER = "inexact_number"
    NON_FINITE = "non_finite"
    TOO_DEEP = "too_deep"
    TOO_LARGE = "too_large"
    NOT_OBJECT = "not_object"
    UNSUPPORTED_TYPE = "unsupported_type"

    ALL = frozenset(
        {
            SYNTAX, INVALID_UTF8, LONE_SURROGATE, DUPLICATE_KEY, UNSTABLE_NORMALIZATION, NOT_NFC,
            INTEGER_RANGE, NON_INTEGER, INEXACT_NUMBER, NON_FINITE, TOO_DEEP,
            TOO_LARGE, NOT_OBJECT, UNSUPPORTED_TYPE,
        }
    )


class DomainError(LedgerError, ValueError):
    """Input refused by the strict domain.

    kind:    one of Kind's strings.
    pointer: the RFC 6901 JSON pointer of the offending value ("" is the whole
             document). When key is True the fault is in a member name of the
             object at pointer, and the name is not repeated.
    offset:  the byte offset of the offending token in JSON text, or -1 for
             refusals of Python values.
    py_type: the Python type refused as unsupported_type, else "".
    """

    def __init__(self, kind: str, pointer: str = "", *, key: bool = False,
                 offset: int = -1, py_type: str = ""):
        self.kind = kind
        self.pointer = pointer
        self.key = key
        self.offset = offset
        self.py_type = py_type
        super().__init__(self._message())

    @property
    def code(self) -> str:
        return self.kind

    def _message(self) -> str:
        where = " in a member name of the object at " if self.key else " at "
        m = "commit: " + self.kind + where + _quote(self.pointer)
        if self.py_type:
            m += f" (Python type {self.py_type})"
        if self.offset >= 0:
            m += f" (byte {self.offset})"
        return m


def _quote(s: str) -> str:
    # Pointers come from the input's member names; quote them like Go's
    # strconv.Quote does closely enough to keep messages on one line.
    out = ['"']
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
