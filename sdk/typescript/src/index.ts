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
export {
  Declaration,
  DeclarationError,
  type Field,
  type FieldType,
  type Tier,
  type Tool,
  type FloorMap,
  type MinimizeOptions,
  type MinimizeResult,
  isFieldName,
  isActionName,
  isActionPart,
  ACTION_DOMAIN_SEPARATOR,
  TIERS_DOMAIN_SEPARATOR,
} from "./declare.js";
export {
  ProjectionError,
  UNMATCHED,
  recipientDomain,
  payeeKnown,
  endpointHost,
  routeShape,
  resourceDir,
  byteSize,
  count,
} from "./project.js";
export {
  renderPreview,
  previewDigest,
  PreviewInputError,
  type Preview,
  type Limits,
  PASSES,
  FALLBACK_PASS,
  PREVIEW_CEILING,
  PREVIEW_DOMAIN_SEPARATOR,
  MARKER,
} from "./preview.js";
export { parseEntry, entryHash, leafHash, isIdentifier, EntryError, type Entry } from "./entry.js";
export { VerifierKey, VerificationError, verifyReceipt, verifyInclusion, type Checkpoint, type InclusionProof } from "./verify.js";
export {
  LedgerClient,
  ApiError,
  ClientError,
  type ClientOptions,
  type DecideRequest,
  type AppendRequest,
  type RequestOptions,
  type Receipt,
  type Decided,
  type OpenedApproval,
  type Terms,
  type ApprovalState,
  type ApprovalStateName,
  type ActionSummary,
} from "./client.js";
export { parseObjectWithRaw } from "./json.js";
export { DeclarationSource, StaleDeclarationError, STALE_DECLARATION_CODES, type DeclarationSourceOptions } from "./source.js";
