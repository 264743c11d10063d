import { readFileSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

/** The repository root (tests run from build/test/). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");

export function repoFile(rel: string): Buffer {
  return readFileSync(path.join(repoRoot, rel));
}

export function repoFileExists(rel: string): boolean {
  return existsSync(path.join(repoRoot, rel));
}

/** Reads a corpus file of testdata/conformance and checks its header. */
export function corpus<C>(kind: string): C[] {
  const doc = JSON.parse(repoFile(`testdata/conformance/${kind}.json`).toString("utf8")) as {
    corpus: string;
    version: number;
    cases: C[];
  };
  if (doc.corpus !== kind || doc.version !== 1 || !Array.isArray(doc.cases)) {
    throw new Error(`testdata/conformance/${kind}.json: unexpected header`);
  }
  return doc.cases;
}

export function b64(s: string): Buffer {
  return Buffer.from(s, "base64");
}

/** Decodes a Go-quoted string ("..." with Go's escapes) to its bytes. */
export function goUnquote(q: string): Buffer {
  if (q.length < 2 || q[0] !== '"' || q[q.length - 1] !== '"') throw new Error("not a Go-quoted string");
  const out: number[] = [];
  const s = q.slice(1, -1);
  const pushRune = (r: number): void => {
    out.push(...Buffer.from(String.fromCodePoint(r), "utf8"));
  };
  for (let i = 0; i < s.length; ) {
    const c = s[i]!;
    if (c !== "\\") {
      pushRune(s.codePointAt(i)!);
      i += s.codePointAt(i)! > 0xffff ? 2 : 1;
      continue;
    }
    const e = s[i + 1]!;
    i += 2;
    const simple: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, "\\": 92, '"': 34, "'": 39 };
    if (e in simple) out.push(simple[e]!);
    else if (e === "x") {
      out.push(parseInt(s.slice(i, i + 2), 16));
      i += 2;
    } else if (e === "u") {
      pushRune(parseInt(s.slice(i, i + 4), 16));
      i += 4;
    } else if (e === "U") {
      pushRune(parseInt(s.slice(i, i + 8), 16));
      i += 8;
    } else if (e >= "0" && e <= "7") {
      out.push(parseInt(s.slice(i - 1, i + 2), 8));
      i += 2;
    } else throw new Error(`unknown Go escape \\${e}`);
  }
  return Buffer.from(out);
}
