// The frozen list of docs/commitment.md §2.4: the code points assigned
// after Unicode 14.0 and up to 17.0 whose normalization is not inert (a
// combining class other than 0, a canonical decomposition, or a part in
// another code point's). Implementations with older Unicode tables take
// them for unassigned, so NFC would judge a string holding one differently
// in different languages; the strict domain refuses such a string as
// unstable_normalization before it judges NFC. Go's commit/unstable.go
// holds the same table; testdata/conformance/unicode/unstable.json is the
// generated list both are tested against.

/** The Unicode version up to which the list is complete. */
export const UNICODE_VERSION_FROZEN = "17.0";

const UNSTABLE_NORMALIZATION =
  /[\u0897\u1acf-\u1add\u1ae0-\u1aeb\u{105c9}\u{105d2}\u{105da}\u{105e4}\u{10d69}-\u{10d6d}\u{10efa}-\u{10efb}\u{10efd}-\u{10eff}\u{11382}-\u{11385}\u{1138b}\u{1138e}\u{11390}-\u{11391}\u{113b8}\u{113bb}\u{113c2}\u{113c5}\u{113c7}-\u{113c9}\u{113ce}-\u{113d0}\u{11f41}-\u{11f42}\u{1611e}-\u{16129}\u{1612f}\u{16d63}\u{16d67}-\u{16d6a}\u{1e08f}\u{1e4ec}-\u{1e4ef}\u{1e5ee}-\u{1e5ef}\u{1e6e3}\u{1e6e6}\u{1e6ee}-\u{1e6ef}\u{1e6f5}]/u;

/** Whether s holds a code point of the frozen list (the caller has checked surrogates). */
export function unstableNormalization(s: string): boolean {
  return UNSTABLE_NORMALIZATION.test(s);
}

/**
 * The strict domain's Unicode rules for a well-formed string: no code point
 * of the frozen list, then NFC. Returns the refusal's kind, or undefined.
 */
export function normalizationFault(s: string): "unstable_normalization" | "not_nfc" | undefined {
  if (UNSTABLE_NORMALIZATION.test(s)) return "unstable_normalization";
  if (s.normalize("NFC") !== s) return "not_nfc";
  return undefined;
}
