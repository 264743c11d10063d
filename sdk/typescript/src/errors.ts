// Typed errors. Every error this package throws is a LedgerError with a
// stable code; messages name fields, pointers and indexes, never raw values.

/** The strict domain's refusal kinds (docs/commitment.md §2), as Go's commit.Kind strings. */
export type Kind =
  | "syntax"
  | "invalid_utf8"
  | "lone_surrogate"
  | "duplicate_key"
  | "unstable_normalization"
  | "not_nfc"
  | "integer_range"
  | "non_integer"
  | "inexact_number"
  | "non_finite"
  | "too_deep"
  | "too_large"
  | "not_object"
  | "unsupported_type";

/** The base of every error this package throws. */
export class LedgerError extends Error {
  /** A stable identifier of the kind of failure, safe to log and compare. */
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LedgerError";
    this.code = code;
  }
}

/**
 * Input refused by the strict domain. It names where the fault is and what
 * kind it is, and never carries the offending value.
 */
export class DomainError extends LedgerError {
  declare readonly code: Kind;
  /** RFC 6901 pointer of the offending value ("" is the whole document). */
  readonly pointer: string;
  /** The fault is in a member name of the object at pointer. */
  readonly key: boolean;
  /** Byte offset of the offending token in the input, or -1 for in-memory values. */
  readonly offset: number;
  constructor(kind: Kind, pointer: string, key: boolean, offset: number) {
    super(
      kind,
      `commit: ${kind}${key ? " in a member name of the object at " : " at "}${JSON.stringify(pointer)}` +
        (offset >= 0 ? ` (byte ${offset})` : ""),
    );
    this.name = "DomainError";
    this.pointer = pointer;
    this.key = key;
    this.offset = offset;
  }
  /** The refusal kind (the same string as code). */
  get kind(): Kind {
    return this.code;
  }
}

/** Renders a path of member names and array indexes as an RFC 6901 pointer. */
export function pointer(path: readonly (string | number)[]): string {
  let s = "";
  for (const p of path) {
    s += "/";
    s += typeof p === "number" ? String(p) : p.replace(/~/g, "~0").replace(/\//g, "~1");
  }
  return s;
}
