import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { canonicalize, paramsDigest, DomainError, type DomainOptions, canonicalizeValue, paramsDigestOf } from "../src/index.js";
import { parseRFC8785 } from "../src/json.js";
import { serializeChecked } from "../src/canonical.js";
import { repoFile, repoRoot, goUnquote } from "./testutil.js";

test("RFC 8785 reference vectors (testdata/rfc8785)", () => {
  const dir = path.join(repoRoot, "testdata/rfc8785/input");
  const names = readdirSync(dir).filter((n) => n.endsWith(".json"));
  assert.ok(names.length >= 6);
  for (const name of names) {
    const got = Buffer.from(serializeChecked(parseRFC8785(repoFile(`testdata/rfc8785/input/${name}`))), "utf8");
    const want = repoFile(`testdata/rfc8785/output/${name}`);
    assert.equal(got.toString("hex"), want.toString("hex"), name);
  }
});

test("RFC 8785 vectors under the strict domain (docs/commitment.md §5)", () => {
  const expect: Record<string, string | null> = {
    "unicode.json": "not_nfc",
    "weird.json": "not_nfc",
    "values.json": "non_integer",
    "arrays.json": null,
    "french.json": null,
    "structures.json": null,
  };
  for (const [name, kind] of Object.entries(expect)) {
    const input = repoFile(`testdata/rfc8785/input/${name}`);
    if (kind === null) {
      assert.deepEqual(canonicalize(input), repoFile(`testdata/rfc8785/output/${name}`), name);
    } else {
      assert.throws(() => canonicalize(input), (e: unknown) => e instanceof DomainError && e.code === kind, name);
    }
  }
  assert.throws(
    () => canonicalize(repoFile("testdata/rfc8785/input/values.json"), { allowNonInteger: true }),
    (e: unknown) => e instanceof DomainError && e.code === "inexact_number",
  );
});

test("worked example (docs/commitment.md §4)", () => {
  const c = paramsDigest(repoFile("testdata/commit/example-payment.json"));
  assert.equal(c.digest, "sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8");
  assert.equal(c.size, 146);
  assert.equal(paramsDigest('{"b":2,"a":1}').digest, "sha256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f");
  assert.equal(paramsDigestOf({ b: 2, a: 1 }).digest, "sha256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f");
});

interface Row {
  header: string[];
  inputs: Buffer[];
}

function equivalenceRows(): Row[] {
  const text = repoFile("testdata/commit/equivalence.txt").toString("utf8");
  const rows: Row[] = [];
  let cur: Row | undefined;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    if (line === "") {
      cur = undefined;
      continue;
    }
    if (cur === undefined) {
      cur = { header: [], inputs: [] };
      // The header: words, with a Go-quoted pointer for refuse rows.
      const m = line.match(/^(refuse \S+ \S+) ("(?:[^"\\]|\\.)*")(.*)$/);
      cur.header = m ? [...m[1]!.split(" "), m[2]!, ...m[3]!.trim().split(/\s+/).filter((w) => w !== "")] : line.split(/\s+/);
      rows.push(cur);
      continue;
    }
    cur.inputs.push(line.startsWith("q ") ? goUnquote(line.slice(2)) : Buffer.from(line, "utf8"));
  }
  return rows;
}

function options(words: string[]): DomainOptions {
  const o: DomainOptions = {};
  for (const w of words) {
    if (w === "allow_non_integer") o.allowNonInteger = true;
    else if (w.startsWith("max_depth=")) o.maxDepth = Number(w.slice(10));
    else if (w.startsWith("max_bytes=")) o.maxBytes = Number(w.slice(10));
  }
  return o;
}

test("equivalence corpus (testdata/commit/equivalence.txt)", () => {
  const rows = equivalenceRows();
  let n = 0;
  for (const { header, inputs } of rows) {
    const [verb, name] = header;
    n++;
    if (verb === "same") {
      const opts = options(header.slice(2));
      const digests = inputs.map((i) => paramsDigest(i, opts).digest);
      for (const d of digests) assert.equal(d, digests[0], name);
      const want = header.find((w) => w.startsWith("sha256:"));
      if (want) assert.equal(digests[0], want, name);
    } else if (verb === "differ") {
      const opts = options(header.slice(2));
      assert.equal(inputs.length, 2, name);
      assert.notEqual(paramsDigest(inputs[0]!, opts).digest, paramsDigest(inputs[1]!, opts).digest, name);
    } else if (verb === "refuse") {
      const kind = header[2]!;
      const ptr = JSON.parse(header[3]!) as string;
      const rest = header.slice(4);
      const key = rest.includes("key");
      assert.throws(
        () => paramsDigest(inputs[0]!, options(rest)),
        (e: unknown) => {
          assert.ok(e instanceof DomainError, `${name}: ${String(e)}`);
          assert.deepEqual({ kind: e.code, pointer: e.pointer, key: e.key }, { kind, pointer: ptr, key }, name);
          return true;
        },
        name,
      );
    } else {
      assert.fail(`unknown row ${verb}`);
    }
  }
  assert.ok(n > 50, `only ${n} rows`);
});

test("in-memory values are held to the domain", () => {
  const refused = (v: unknown, kind: string, ptr: string, opts?: DomainOptions): void => {
    assert.throws(
      () => canonicalizeValue(v as never, opts),
      (e: unknown) => e instanceof DomainError && e.code === kind && e.pointer === ptr,
      `${kind} ${ptr}`,
    );
  };
  refused({ a: 0.5 }, "non_integer", "/a");
  refused({ a: [NaN] }, "non_finite", "/a/0");
  refused({ a: 2 ** 53 }, "integer_range", "/a");
  refused({ "e\u0301": 1 }, "not_nfc", "");
  refused({ s: "\ud800" }, "lone_surrogate", "/s");
  refused({ d: new Date(0) }, "unsupported_type", "/d");
  refused({ a: { b: {} } }, "too_deep", "/a/b", { maxDepth: 2 });
  assert.equal(canonicalizeValue({ a: 0.5 }, { allowNonInteger: true }).toString(), '{"a":0.5}');
  assert.equal(canonicalizeValue(new Map([["\ue000", 1], ["\ud83d\ude02", 2]])).toString(), '{"\ud83d\ude02":2,"\ue000":1}');
});
