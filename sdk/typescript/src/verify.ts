// Receipt verification with the log's verifier key: Ed25519 (node:crypto),
// C2SP signed-note checkpoints (docs/log.md §3, §4), the entry signature
// (docs/entry.md §2) and RFC 6962 inclusion proofs. Go's verify and
// golang.org/x/mod/sumdb/note are the reference.

import { createHash, createPublicKey, type KeyObject, verify as edVerify } from "node:crypto";
import { LedgerError } from "./errors.js";
import { type Entry, EntryError, leafHash, parseEntry } from "./entry.js";

/**
 * A receipt, entry or checkpoint that does not verify. check is the
 * stable name ledger-verify reports: "encoding", "key", "signature",
 * "index", "inclusion", "checkpoint-signature".
 */
export class VerificationError extends LedgerError {
  readonly check: string;
  constructor(check: string, message: string, options?: { cause?: unknown }) {
    super("unverified", `verify: ${check}: ${message}`, options);
    this.name = "VerificationError";
    this.check = check;
  }
}

const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

function isValidName(name: string): boolean {
  return name !== "" && !/[\s+]/u.test(name) && !name.includes("\ufffd");
}

function keyHash(name: string, key: Buffer): number {
  const h = createHash("sha256").update(name).update("\n").update(key).digest();
  return h.readUInt32BE(0);
}

function canonicalBase64(s: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) return null;
  const b = Buffer.from(s, "base64");
  return b.toString("base64") === s ? b : null;
}

/** A trusted ledger key, from its note verifier key "<name>+<hash>+<base64(0x01 || key)>". */
export class VerifierKey {
  readonly vkey: string;
  /** The key name, which is also the log origin. */
  readonly origin: string;
  /** "<name>+<hash>", the entries' key_id. */
  readonly id: string;
  readonly hash: number;
  readonly publicKey: Buffer;
  private readonly key: KeyObject;

  constructor(vkey: string) {
    const fail = (): never => {
      throw new LedgerError("bad_verifier_key", "verify: verifier key: malformed");
    };
    // name+hash+base64, the base64 itself possibly holding '+'.
    const p1 = vkey.indexOf("+");
    const p2 = p1 < 0 ? -1 : vkey.indexOf("+", p1 + 1);
    if (p2 < 0) fail();
    const [name, hash16, key64] = [vkey.slice(0, p1), vkey.slice(p1 + 1, p2), vkey.slice(p2 + 1)];
    const key = canonicalBase64(key64);
    if (!/^[0-9a-fA-F]{8}$/.test(hash16) || key === null || !isValidName(name) || key.length === 0) fail();
    const hash = parseInt(hash16, 16);
    if (keyHash(name, key!) !== hash) throw new LedgerError("bad_verifier_key", "verify: verifier key: the key hash does not match the key");
    if (key!.length !== 33 || key![0] !== 1) throw new LedgerError("bad_verifier_key", "verify: verifier key: not an Ed25519 key");
    this.vkey = vkey;
    this.origin = name;
    this.hash = hash;
    this.id = `${name}+${hash16.toLowerCase()}`;
    this.publicKey = key!.subarray(1);
    this.key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, this.publicKey]), format: "der", type: "spki" });
  }

  /** Verifies an Ed25519 signature by this key. */
  verifySignature(message: Uint8Array, sig: Uint8Array): boolean {
    if (sig.length !== 64) return false;
    return edVerify(null, message, this.key, sig);
  }

  /**
   * Opens a signed checkpoint strictly: a well-formed C2SP signed note,
   * every signature line in canonical base64, every line by this key
   * verifying and at least one; then its body as a C2SP checkpoint of this
   * log's origin.
   */
  openCheckpoint(signed: Uint8Array): Checkpoint {
    const fail = (why: string): never => {
      throw new VerificationError("checkpoint-signature", why);
    };
    const msg = Buffer.from(signed);
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(msg);
    } catch {
      return fail("not UTF-8");
    }
    if (/[\u0000-\u0009\u000b-\u001f]/.test(text)) fail("a control character in the note");
    const split = text.lastIndexOf("\n\n");
    if (split < 0) fail("no signature block");
    const body = text.slice(0, split + 1);
    const sigs = text.slice(split + 2);
    if (sigs === "" || !sigs.endsWith("\n")) fail("malformed signature block");
    let verified = 0;
    const lines = sigs.slice(0, -1).split("\n");
    if (lines.length > 100) fail("too many signatures");
    for (const line of lines) {
      if (!line.startsWith("\u2014 ")) fail("malformed signature line");
      const rest = line.slice(2);
      const sp = rest.indexOf(" ");
      const name = sp >= 0 ? rest.slice(0, sp) : rest;
      const b64 = sp >= 0 ? rest.slice(sp + 1) : "";
      const raw = canonicalBase64(b64);
      if (raw === null || !isValidName(name) || b64 === "" || raw.length < 5) fail("malformed or non-canonical signature line");
      const hash = raw!.readUInt32BE(0);
      if (name !== this.origin || hash !== this.hash) continue; // another signer's line
      if (!this.verifySignature(Buffer.from(body, "utf8"), raw!.subarray(4))) fail("the trusted key's signature does not verify");
      verified++;
    }
    if (verified === 0) fail("not signed by the trusted key");
    const l = body.split("\n");
    if (l.length < 4) fail("too few lines");
    const origin = l[0]!;
    if (origin === "") fail("empty origin");
    if (!/^[0-9]+$/.test(l[1]!) || l[1]!.length > 20) fail("malformed tree size");
    const size = Number(l[1]);
    if (!Number.isSafeInteger(size)) fail("tree size beyond 2^53-1");
    const root = canonicalBase64(l[2]!);
    if (root === null || root.length !== 32) fail("malformed root hash");
    if (origin !== this.origin) fail("the checkpoint is for another origin");
    return { origin, size, root: root!, signed: msg };
  }

  /** Checks that a decoded entry belongs to this log and carries a valid signature by this key. */
  verifyEntry(e: Entry): void {
    if (e.origin !== this.origin || e.keyId !== this.id) throw new VerificationError("key", `entry ${e.index} names another log origin or key`);
    if (!this.verifySignature(e.message, e.sig)) throw new VerificationError("signature", `entry ${e.index}: the signature does not verify`);
  }
}

/** A checkpoint opened with a trusted key. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Buffer;
  signed: Buffer;
}

function hashChildren(l: Buffer, r: Buffer): Buffer {
  return createHash("sha256").update(Buffer.of(1)).update(l).update(r).digest();
}

/** Verifies an RFC 6962 inclusion proof (RFC 9162 §2.1.3.2). */
export function verifyInclusion(index: number, treeSize: number, leaf: Buffer, proof: readonly Buffer[], root: Buffer): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(treeSize) || index < 0 || index >= treeSize) return false;
  let fn = index;
  let sn = treeSize - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0 || p.length !== 32) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = hashChildren(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = hashChildren(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}

export interface InclusionProof {
  index: number;
  treeSize: number;
  hashes: readonly Buffer[];
}

/** Decodes an entry for verification, reporting a decoding failure as the "encoding" check. */
function decode(raw: Uint8Array): Entry {
  try {
    return parseEntry(raw);
  } catch (e) {
    if (e instanceof EntryError) throw new VerificationError("encoding", e.message, { cause: e });
    throw e;
  }
}

/**
 * Verifies a signed entry, and with a checkpoint and an inclusion proof
 * that it is in the checkpoint's tree, in the order of
 * docs/conformance.md §5. Returns the decoded entry; throws
 * VerificationError naming the first check that fails.
 */
export function verifyReceipt(
  key: VerifierKey,
  rawEntry: Uint8Array,
  proof?: { checkpoint: Uint8Array; inclusion: InclusionProof },
): { entry: Entry; checkpoint: Checkpoint | undefined } {
  if (proof === undefined) {
    const e = decode(rawEntry);
    key.verifyEntry(e);
    return { entry: e, checkpoint: undefined };
  }
  const cp = key.openCheckpoint(proof.checkpoint);
  if (proof.inclusion.treeSize !== cp.size) throw new VerificationError("inclusion", "the proof's tree size is not the checkpoint's");
  const e = decode(rawEntry);
  if (e.index !== proof.inclusion.index) throw new VerificationError("index", `entry ${e.index} is not the proof's index ${proof.inclusion.index}`);
  key.verifyEntry(e);
  if (!verifyInclusion(e.index, cp.size, leafHash(e.raw), proof.inclusion.hashes, cp.root)) {
    throw new VerificationError("inclusion", `entry ${e.index} is not in the checkpoint's tree`);
  }
  return { entry: e, checkpoint: cp };
}
