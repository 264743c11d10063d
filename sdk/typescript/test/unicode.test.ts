import { test } from "node:test";
import assert from "node:assert/strict";
import { paramsDigest, paramsDigestOf, DomainError } from "../src/index.js";
import { UNICODE_VERSION_FROZEN, unstableNormalization } from "../src/unicode.js";
import { repoFile } from "./testutil.js";

interface FrozenList {
  unicode: string;
  count: number;
  code_points: { code_point: string; why: string[] }[];
}

const list = JSON.parse(repoFile("testdata/conformance/unicode/unstable.json").toString("utf8")) as FrozenList;
const listed = list.code_points.map((c) => parseInt(c.code_point, 16));

test("the runtime's Unicode is not newer than the frozen list", () => {
  const version = process.versions.unicode ?? "";
  assert.notEqual(version, "", "process.versions.unicode is not set: the runtime's Unicode version is unknown");
  const [major, minor] = version.split(".").map(Number) as [number, number];
  const [fMajor, fMinor] = UNICODE_VERSION_FROZEN.split(".").map(Number) as [number, number];
  assert.ok(
    major < fMajor || (major === fMajor && (minor ?? 0) <= fMinor),
    `Node's ICU has Unicode ${version}, newer than the ${UNICODE_VERSION_FROZEN} the list of unstable normalization (docs/commitment.md §2.4) is frozen at: extend the list first (testdata/conformance/unicode/gen.mjs), in every implementation`,
  );
});

test("the table is the generated list, code point for code point", () => {
  assert.equal(list.unicode, "17.0");
  assert.equal(list.count, listed.length);
  const want = new Set(listed);
  const wrong: string[] = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    if (unstableNormalization(String.fromCodePoint(cp)) !== want.has(cp)) wrong.push(cp.toString(16));
  }
  assert.deepEqual(wrong, []);
});

test("Node's Unicode tables find every listed code point not inert, for the reasons given", () => {
  // A second look at the list with this runtime's ICU: ccc through
  // canonical reordering, decompositions through NFD, and parts of another
  // code point's decomposition.
  const parts = new Set<number>();
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    const d = c.normalize("NFD");
    if (d !== c) for (const p of d) parts.add(p.codePointAt(0)!);
  }
  for (const { code_point, why } of list.code_points) {
    const cp = parseInt(code_point, 16);
    const c = String.fromCodePoint(cp);
    const got: string[] = [];
    const decomposes = c.normalize("NFD") !== c;
    const moves = (c + "\u0334").normalize("NFD") !== c + "\u0334" || ("\u0301" + c).normalize("NFD") !== "\u0301" + c;
    if (!decomposes && moves) got.push("ccc");
    if (decomposes) got.push("decomposition");
    if (parts.has(cp)) got.push("composition");
    assert.deepEqual(got, why, `U+${code_point}`);
  }
});

test("a listed code point is refused before NFC is judged", () => {
  for (const cp of listed) {
    const c = String.fromCodePoint(cp);
    for (const [text, ptr, key] of [
      [JSON.stringify({ s: "a" + c }), "/s", false],
      [JSON.stringify({ o: { [c]: 1 } }), "/o", true],
      [JSON.stringify({ l: ["e\u0301" + c] }), "/l/0", false],
    ] as const) {
      assert.throws(
        () => paramsDigest(Buffer.from(text)),
        (e: unknown) => e instanceof DomainError && e.code === "unstable_normalization" && e.pointer === ptr && e.key === key,
        `U+${cp.toString(16)} in ${ptr}`,
      );
    }
    assert.throws(
      () => paramsDigestOf({ v: [c] }),
      (e: unknown) => e instanceof DomainError && e.code === "unstable_normalization" && e.pointer === "/v/0",
    );
  }
  assert.equal(paramsDigest(Buffer.from('{"s":"a\\u0898\\u1ac1"}')).size, 15);
});
