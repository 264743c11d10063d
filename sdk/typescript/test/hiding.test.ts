import { test } from "node:test";
import assert from "node:assert/strict";
import { format, inspect } from "node:util";
import {
  canonicalize,
  derivedOpenings,
  Declaration,
  DeclarationError,
  Disclosure,
  DisclosureError,
  DomainError,
  hide,
  LedgerError,
  Opening,
  OpeningError,
  paramsDigest,
  paramsDigestEqual,
  parseParamsDigest,
  randomOpenings,
} from "../src/index.js";
import { hkdf32 } from "../src/hiding.js";
import { b64, corpus, repoFile } from "./testutil.js";
import { editedFile, edits, fixedOpenings } from "./disclosure-edits.js";

const payment = repoFile("testdata/calls/make_payment.json");

interface FileFields {
  fields: Record<string, { commitment: string; opening?: string; value?: unknown }>;
  params_digest: string;
  params_size: number;
}

function fileOf(x: Disclosure): FileFields {
  return JSON.parse(x.serialize().toString("utf8")) as FileFields;
}

function isDisclosureError(code: string, field = "", pointer?: string): (e: unknown) => boolean {
  return (e: unknown) => e instanceof DisclosureError && e instanceof LedgerError && e.code === code && e.field === field && (pointer === undefined || e.pointer === pointer);
}

test("a hiding commitment opens with its disclosure; every subset of make_payment's fields verifies, also through the file", () => {
  const { commitment: c, disclosure: x } = hide(payment);
  assert.equal(c.hiding, true);
  assert.match(c.digest, /^v2:sha256:[0-9a-f]{64}$/);
  // The size is what the digest covers: four names and four 32-byte commitments, whatever the values' lengths.
  assert.equal(c.size, '"amount_minor""currency""memo""payee"'.length + 4 * 32);
  x.check(c);
  assert.deepEqual(x.params(), canonicalize(payment));
  const fields = x.fields();
  assert.deepEqual(fields, ["amount_minor", "currency", "memo", "payee"]);
  let subsets = 0;
  for (let mask = 0; mask < 1 << fields.length; mask++) {
    const names = fields.filter((_, i) => (mask & (1 << i)) !== 0);
    const y = x.only(names);
    y.check(c);
    assert.deepEqual(y.disclosed(), names);
    assert.deepEqual(y.hidden(), fields.filter((f) => !names.includes(f)));
    assert.equal(y.params() !== undefined, names.length === fields.length, `${names}: params() only when whole`);
    for (const f of fields) assert.equal(y.value(f) !== undefined, names.includes(f));
    const file = y.serialize();
    const z = Disclosure.parse(file);
    z.check(c);
    assert.deepEqual(z.disclosed(), names);
    assert.ok(z.serialize().equals(file), `${names}: read back differs`);
    // A hidden field's file entry is its commitment alone.
    for (const [name, f] of Object.entries(fileOf(y).fields)) assert.deepEqual(Object.keys(f), names.includes(name) ? ["commitment", "opening", "value"] : ["commitment"]);
    subsets++;
  }
  assert.equal(subsets, 16);
  assert.throws(() => x.only(["payee"]).only(["memo"]), isDisclosureError("field_not_opened", "memo"));
  assert.throws(() => x.only(["extra"]), isDisclosureError("field_not_opened", "extra"));
});

test("two hides of identical parameters share no field commitment, no opening and no digest: nothing links them", () => {
  const a = hide(payment);
  const b = hide(payment);
  assert.notEqual(a.commitment.digest, b.commitment.digest);
  assert.equal(a.commitment.size, b.commitment.size, "the size depends on the names only");
  const fa = fileOf(a.disclosure).fields;
  const fb = fileOf(b.disclosure).fields;
  const all = (f: FileFields["fields"]): string[] => Object.values(f).flatMap((x) => [x.commitment, x.opening!]);
  for (const h of all(fa)) assert.ok(!all(fb).includes(h), "a commitment or opening of one call appears in the other");
  // Within one call, each field has its own opening.
  assert.equal(new Set(Object.values(fa).map((x) => x.opening)).size, 4);
  // Explicit random openings are the default's.
  const r = hide(payment, randomOpenings());
  assert.notEqual(r.commitment.digest, a.commitment.digest);
  r.disclosure.check(r.commitment);
});

test("a changed value, a changed opening, another call's opening are refused naming the field; no error holds a value or an opening", () => {
  const { commitment: c, disclosure: x } = hide(payment);
  const other = hide(payment).disclosure;
  const file = x.serialize().toString("utf8");
  const mine = fileOf(x).fields["payee"]!;
  const theirs = fileOf(other).fields["payee"]!;
  const flipped = (mine.opening![0] === "0" ? "1" : "0") + mine.opening!.slice(1);
  const cases: [string, string, (e: unknown) => boolean][] = [
    ["changed value", file.replace('"value":"payee-0001"', '"value":"payee-0002"'), isDisclosureError("field_mismatch", "payee", "")],
    ["changed opening", file.replace(mine.opening!, flipped), isDisclosureError("field_mismatch", "payee", "")],
    ["opening of another call", file.replace(mine.opening!, theirs.opening!), isDisclosureError("field_mismatch", "payee", "")],
    ["changed memo value", file.replace('"value":"Invoice 4711"', '"value":"Invoice 4712"'), isDisclosureError("field_mismatch", "memo", "")],
    ["changed amount", file.replace('"value":42000', '"value":42001'), isDisclosureError("field_mismatch", "amount_minor", "")],
  ];
  const secrets = ["payee-0001", "payee-0002", "Invoice", "42000", "42001", mine.opening!, flipped, theirs.opening!];
  const errors: unknown[] = [];
  for (const [name, edited, want] of cases) {
    assert.notEqual(edited, file, `${name}: no change`);
    const y = Disclosure.parse(edited);
    assert.throws(() => y.check(c), want, name);
    try {
      y.check(c);
    } catch (e) {
      errors.push(e);
    }
  }
  assert.throws(() => other.check(c), isDisclosureError("commitment_mismatch"), "another entry's disclosure");
  assert.throws(() => x.check({ digest: c.digest.slice(3), size: c.size }), isDisclosureError("not_hiding"), "a version 1 digest");
  assert.throws(() => x.check({ digest: c.digest, size: c.size + 1 }), isDisclosureError("commitment_mismatch"), "another size");
  assert.throws(() => x.check({ digest: "v2:" + c.digest, size: c.size }), (e: unknown) => e instanceof LedgerError && e.code === "malformed_digest");
  // A commitment replaced in the file: its own digest no longer matches.
  assert.throws(() => Disclosure.parse(file.replace(mine.commitment, theirs.commitment)), isDisclosureError("malformed", "", "/params_digest"));
  for (const f of [() => other.check(c), () => x.only(["nope"]), () => Disclosure.parse(file.replace('"value":42000', '"value":1.5'))]) {
    try {
      f();
    } catch (e) {
      errors.push(e);
    }
  }
  assert.equal(errors.length, 8);
  for (const e of errors) {
    for (const form of [String(e), (e as Error).stack ?? "", inspect(e, { showHidden: true, depth: 9 }), JSON.stringify(e)]) {
      for (const s of secrets) assert.ok(!form.includes(s), `an error shows ${s}: ${form}`);
    }
  }
});

test("a disclosure is an opening source: the retried call commits identically iff its parameters are equal", () => {
  const { commitment: c, disclosure: x } = hide(payment);
  const reordered = '{"currency":"EUR","memo":"Invoice 4711","amount_minor":42000,"payee":"payee-0001"}';
  const again = hide(reordered, x);
  assert.equal(again.commitment.digest, c.digest);
  assert.equal(again.commitment.size, c.size);
  assert.ok(paramsDigestEqual(again.commitment.digest, c.digest));
  // 42000 spelled 4.2e4 is the same integer: the same commitment.
  assert.equal(hide(reordered.replace("42000", "4.2e4"), x).commitment.digest, c.digest);
  const changed = hide(reordered.replace("42000", "42001"), x);
  assert.notEqual(changed.commitment.digest, c.digest);
  assert.throws(() => changed.disclosure.check(c), isDisclosureError("commitment_mismatch"));
  assert.throws(() => hide('{"payee":"payee-0001","extra":1}', x), isDisclosureError("field_not_opened", "extra"));
  // A disclosure that opens fewer fields cannot re-commit the whole call.
  assert.throws(() => hide(payment, x.only(["payee"])), isDisclosureError("field_not_opened", "amount_minor"));
  // A field the first call had may be absent: the commitment differs (the map has one name fewer).
  assert.notEqual(hide('{"payee":"payee-0001"}', x).commitment.digest, c.digest);
  // Read back from its file, the disclosure still opens the same fields.
  assert.equal(hide(reordered, Disclosure.parse(x.serialize())).commitment.digest, c.digest);
});

test("derived openings: a function of the secret, the call key and the field only; their refusals", () => {
  const secret = Buffer.alloc(32, 7);
  const a = derivedOpenings(secret, "call-1");
  const ca = hide(payment, a).commitment;
  assert.equal(hide(payment, derivedOpenings(secret, "call-1")).commitment.digest, ca.digest);
  assert.notEqual(hide(payment, derivedOpenings(secret, "call-2")).commitment.digest, ca.digest);
  assert.notEqual(hide(payment, derivedOpenings(Buffer.alloc(32, 8), "call-1")).commitment.digest, ca.digest);
  assert.ok(!a.opening("payee").equals(a.opening("memo")), "two fields share an opening");
  assert.ok(a.opening("payee").equals(derivedOpenings(Buffer.alloc(40, 7).subarray(0, 32), "call-1").opening("payee")));
  // The secret is copied: changing the caller's buffer later changes nothing.
  const mutable = Buffer.alloc(32, 7);
  const m = derivedOpenings(mutable, "call-1");
  mutable.fill(9);
  assert.equal(hide(payment, m).commitment.digest, ca.digest);

  const refused = (code: string) => (e: unknown) => e instanceof OpeningError && e.code === code;
  assert.throws(() => derivedOpenings(Buffer.alloc(31, 7), "k"), refused("short_secret"));
  assert.throws(() => derivedOpenings(secret, ""), refused("empty_call_key"));
  assert.throws(() => derivedOpenings(secret, "call-\ud800"), refused("bad_call_key"));
  assert.throws(() => derivedOpenings(secret, "cafe\u0301"), refused("bad_call_key"));
  assert.throws(() => a.opening("e\u0301"), (e: unknown) => e instanceof DomainError && e.code === "not_nfc" && e.key);

  // A name long enough that JCS(call key) || JCS(name) passes node's 1024-byte
  // bound on HKDF info: RFC 5869 by hand, as Go's crypto/hkdf gives it
  // (the hex below was computed with Python's hmac and with Go).
  const long = derivedOpenings(secret, "call-0001").opening("f".repeat(2000));
  const file = fileOf(hide(JSON.stringify({ ["f".repeat(2000)]: 1 }), { opening: () => long }).disclosure);
  assert.equal(file.fields["f".repeat(2000)]!.opening, "db51e4bfb5df0321c643ecd6599bc124d67ac08f838f26180c6fb59b1ef09aa4");
  // The expansion by hand is node's hkdfSync wherever node computes one.
  for (const n of [0, 1, 31, 32, 33, 64, 1000, 1023, 1024]) {
    const info = Buffer.alloc(n, 0x61);
    assert.ok(hkdf32(secret, info, false).equals(hkdf32(secret, info, true)), `info of ${n} bytes`);
  }
});

test("hide refuses exactly what paramsDigest refuses, with the same kind, pointer, offset and message", () => {
  for (const input of ["[]", '{"a":1,"a":2}', '{"a":1e400}', '{"a":"e\\u0301"}', Buffer.from('{"a":"\xff"}', "latin1"), '{"a":9007199254740992}', '{"a":1.5}', "{", '{"a":{"k":1,"k":2}}', " 7"]) {
    let v1: unknown;
    let v2: unknown;
    try {
      paramsDigest(input);
    } catch (e) {
      v1 = e;
    }
    try {
      hide(input);
    } catch (e) {
      v2 = e;
    }
    assert.ok(v1 instanceof DomainError && v2 instanceof DomainError, String(input));
    assert.deepEqual([v2.code, v2.pointer, v2.key, v2.offset, v2.message], [v1.code, v1.pointer, v1.key, v1.offset, v1.message], String(input));
  }
  // The domain's options apply: a non-integer admitted, a bound lowered.
  assert.doesNotThrow(() => hide('{"a":0.25}', undefined, { allowNonInteger: true }));
  assert.throws(() => hide('{"a":[[1]]}', undefined, { maxDepth: 2 }), (e: unknown) => e instanceof DomainError && e.code === "too_deep");
});

test("openings, disclosures and opening sources print redacted: no value and no opening in any printed form", () => {
  const { disclosure: x } = hide(payment);
  const secret = Buffer.alloc(32, 0x5a);
  const src = derivedOpenings(secret, "call-1");
  const o = x.opening("memo");
  const openingHex = fileOf(x).fields["memo"]!.opening!;
  const forbidden = ["Invoice", "payee-0001", "42000", openingHex, secret.toString("hex"), secret.toString("base64"), "90, 90, 90"];
  const shown: string[] = [];
  for (const v of [x, x.only(["memo"]), o, src, { nested: { x, o } }]) {
    shown.push(String(v), `${v as object}`, JSON.stringify(v), inspect(v), inspect(v, { showHidden: true, depth: 9, getters: true }), format("%o %O %j %s", v, v, v, v));
  }
  for (const s of shown) for (const f of forbidden) assert.ok(!s.includes(f), `printed ${f}: ${s}`);
  assert.equal(String(x), "Disclosure(4 fields, 4 disclosed)");
  assert.equal(String(x.only(["memo"])), "Disclosure(4 fields, 1 disclosed)");
  assert.equal(String(o), "Opening(redacted)");
  assert.equal(inspect(src), "DerivedOpenings(redacted)");
  // Nothing enumerable either.
  assert.deepEqual(Object.keys(x), []);
  assert.deepEqual(Object.keys(o), []);
  // The file is the one explicit way out, and it does hold them.
  assert.ok(x.serialize().toString("utf8").includes(openingHex));
  assert.throws(() => Opening.from(Buffer.alloc(31)), (e: unknown) => e instanceof OpeningError && e.code === "bad_opening");
});

test("malformed disclosure files are refused with the JSON pointer Go gives", () => {
  for (const e of edits) {
    const file = editedFile(e);
    assert.throws(
      () => Disclosure.parse(file),
      (err: unknown) => err instanceof DisclosureError && err.code === "malformed" && err.pointer === e.pointer && err.field === "",
      `${e.name}: want malformed at ${JSON.stringify(e.pointer)}`,
    );
  }
  // Values are held to the domain of the parameters it is given.
  const file = hide('{"a":0.25}', fixedOpenings("a"), { allowNonInteger: true }).disclosure.serialize();
  assert.throws(() => Disclosure.parse(file), isDisclosureError("malformed", "", "/fields/a/value"));
  assert.deepEqual(Disclosure.parse(file, { allowNonInteger: true }).disclosed(), ["a"]);
  // Spacing and member order are the reader's to accept.
  const spaced = Buffer.from(JSON.stringify(JSON.parse(file.toString("utf8")), null, 2).replace('"disclosure": 2,', '"disclosure" : 2 ,'));
  assert.ok(Disclosure.parse(spaced, { allowNonInteger: true }).serialize().equals(file));
});

test("parameter digests of either version: spelled exactly, compared as whole strings", () => {
  const h = "ab".repeat(32);
  assert.deepEqual(parseParamsDigest("sha256:" + h), { digest: Buffer.from(h, "hex"), hiding: false });
  assert.deepEqual(parseParamsDigest("v2:sha256:" + h), { digest: Buffer.from(h, "hex"), hiding: true });
  for (const bad of ["v3:sha256:" + h, "V2:sha256:" + h, "v2:sha256:" + h.toUpperCase(), "v2:" + h, "v2:sha256:" + h + " ", "v2:v2:sha256:" + h, "v2:sha256:" + h.slice(2)]) {
    assert.throws(() => parseParamsDigest(bad), (e: unknown) => e instanceof LedgerError && e.code === "malformed_digest", bad);
    assert.equal(paramsDigestEqual(bad, bad), false, bad);
  }
  assert.equal(paramsDigestEqual("v2:sha256:" + h, "v2:sha256:" + h), true);
  assert.equal(paramsDigestEqual("v2:sha256:" + h, "sha256:" + h), false);
  assert.equal(paramsDigestEqual("sha256:" + h, "sha256:" + h), true);
  assert.equal(paramsDigest("{}").hiding, false);
});

interface MinimizeCase {
  name: string;
  declaration: unknown;
  params_base64: string;
  allowlists?: Record<string, string[]>;
  expect: { attributes_base64?: string; tiers_digest?: string; refusal?: { code: string; pointer: string } };
}

test("minimize with commitment version 2: every minimize.json case gives version 1's attributes or refusal, and a disclosure opening its commitment", () => {
  const cases = corpus<MinimizeCase>("minimize");
  let committed = 0;
  let refused = 0;
  for (const c of cases) {
    const raw = b64(c.params_base64);
    const opts = c.allowlists === undefined ? {} : { allowlists: c.allowlists };
    if (c.expect.refusal !== undefined) {
      assert.throws(
        () => Declaration.parse(JSON.stringify(c.declaration)).minimize(raw, { ...opts, commitmentVersion: 2 }),
        (e: unknown) => e instanceof DeclarationError && e.code === c.expect.refusal!.code && e.pointer === c.expect.refusal!.pointer,
        c.name,
      );
      refused++;
      continue;
    }
    const r = Declaration.parse(JSON.stringify(c.declaration)).minimize(raw, { ...opts, commitmentVersion: 2 });
    assert.equal(r.attributes.toString("base64"), c.expect.attributes_base64, c.name);
    assert.equal(r.tiersDigest, c.expect.tiers_digest, c.name);
    assert.match(r.params.digest, /^v2:sha256:[0-9a-f]{64}$/, c.name);
    r.disclosure.check(r.params);
    assert.deepEqual(r.disclosure.params(), canonicalize(raw), c.name);
    committed++;
  }
  assert.ok(committed > 0 && refused > 0 && committed + refused === cases.length, `${committed} committed, ${refused} refused`);

  const d = Declaration.parse(repoFile("testdata/declarations/make_payment.json"));
  const allowlists = { payees: ["payee-0001"] };
  const v1 = d.minimize(payment, { allowlists });
  assert.equal(v1.params.hiding, false, "version 1 stays the default");
  assert.ok(!("disclosure" in v1));
  const v2 = d.minimize(payment, { allowlists, commitmentVersion: 2 });
  assert.deepEqual(v2.attributes, v1.attributes);
  // The retried call, re-committed with the first call's disclosure.
  const retried = d.minimize(payment, { allowlists, commitmentVersion: 2, openings: v2.disclosure });
  assert.equal(retried.params.digest, v2.params.digest);
  const derived = d.minimize(payment, { allowlists, commitmentVersion: 2, openings: derivedOpenings(Buffer.alloc(32, 1), "call-1") });
  assert.equal(derived.params.digest, hide(payment, derivedOpenings(Buffer.alloc(32, 1), "call-1")).commitment.digest);
  assert.throws(() => d.minimize(payment, { allowlists, openings: v2.disclosure }), (e: unknown) => e instanceof LedgerError && e.code === "bad_options");
});
