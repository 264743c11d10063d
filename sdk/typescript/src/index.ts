export { LedgerError, DomainError, type Kind } from "./errors.js";
export {
  parse,
  parseObject,
  JsonNumber,
  type JsonValue,
  type JsonObject,
  type JsonText,
  type DomainOptions,
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_DEPTH,
  MAX_SAFE_INTEGER,
} from "./json.js";
export {
  canonicalize,
  canonicalizeValue,
  paramsDigest,
  paramsDigestOf,
  parseDigest,
  digestEqual,
  PARAMS_DOMAIN_SEPARATOR,
  type Commitment,
  type JsonInput,
} from "./canonical.js";
