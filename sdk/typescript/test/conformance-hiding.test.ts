import { test } from "node:test";
import assert from "node:assert/strict";
import { hide, derivedOpenings, Disclosure, DisclosureError, DomainError, Opening, OpeningError, type OpeningSource } from "../src/index.js";
import { corpus, b64 } from "./testutil.js";

interface Refusal {
  code: string;
  pointer: string;
  field?: string;
  key?: boolean;
}
interface HidingCase {
  name: string;
  kind: string;
  // commit
  params_base64?: string;
  openings?: Record<string, string>;
  // derive
  secret_hex?: string;
  call_key?: string;
  field?: string;
  // disclose
  disclosure_base64?: string;
  params_digest?: string;
  params_size?: number;
  expect: {
    digest?: string;
    size?: number;
    commitments?: Record<string, string>;
    disclosure_base64?: string;
    opening?: string;
    disclosed?: string[];
    hidden?: string[];
    params_base64?: string;
    refusal?: Refusal;
  };
}

/** The case's fixed openings (docs/conformance.md §5a). */
function fixed(openings: Record<string, string>): OpeningSource {
  return {
    opening(field: string): Opening {
      const h = openings[field];
      if (h === undefined || !Object.hasOwn(openings, field)) throw new Error(`the case has no opening for ${JSON.stringify(field)}`);
      return Opening.from(Buffer.from(h, "hex"));
    },
  };
}

/** A refusal as the corpus writes it: key and field only when set. */
function refusal(code: string, pointer: string, extra: { key?: boolean; field?: string } = {}): { refusal: Refusal } {
  return { refusal: { code, pointer, ...(extra.key === true ? { key: true } : {}), ...(extra.field !== undefined && extra.field !== "" ? { field: extra.field } : {}) } };
}

/** The commitments of a disclosure file, read back from its bytes (as Go's corpus builder does). */
function commitmentsOf(file: Buffer): Record<string, string> {
  const doc = JSON.parse(file.toString("utf8")) as { fields: Record<string, { commitment: string }> };
  const out: Record<string, string> = {};
  for (const [name, f] of Object.entries(doc.fields)) out[name] = f.commitment;
  return out;
}

function run(c: HidingCase): unknown {
  switch (c.kind) {
    case "commit": {
      try {
        const { commitment, disclosure } = hide(b64(c.params_base64!), fixed(c.openings ?? {}));
        const file = disclosure.serialize();
        // The case's disclosure must open its own commitment, through the file.
        Disclosure.parse(file).check(commitment);
        assert.deepEqual(Object.keys(c.openings ?? {}).sort(), disclosure.fields(), `${c.name}: openings and fields`);
        return { digest: commitment.digest, size: commitment.size, commitments: commitmentsOf(file), disclosure_base64: file.toString("base64") };
      } catch (e) {
        if (!(e instanceof DomainError)) throw e;
        return refusal(e.code, e.pointer, { key: e.key });
      }
    }
    case "derive": {
      try {
        const src = derivedOpenings(Buffer.from(c.secret_hex!, "hex"), c.call_key ?? "");
        const o = src.opening(c.field!);
        // The only way to read an opening's bytes is through a file: commit {field: null} under it.
        const file = JSON.parse(hide(JSON.stringify({ [c.field!]: null }), { opening: () => o }).disclosure.serialize().toString("utf8")) as {
          fields: Record<string, { opening: string }>;
        };
        return { opening: file.fields[c.field!]!.opening };
      } catch (e) {
        if (!(e instanceof OpeningError)) throw e;
        return refusal(e.code, "");
      }
    }
    case "disclose": {
      try {
        const x = Disclosure.parse(b64(c.disclosure_base64!));
        x.check({ digest: c.params_digest!, size: c.params_size! });
        const p = x.params();
        // What the file says, written canonically, reads back to the same bytes.
        const again = Disclosure.parse(x.serialize());
        assert.ok(again.serialize().equals(x.serialize()), `${c.name}: serialize, parse, serialize`);
        return { disclosed: x.disclosed(), hidden: x.hidden(), ...(p !== undefined ? { params_base64: p.toString("base64") } : {}) };
      } catch (e) {
        if (!(e instanceof DisclosureError)) throw e;
        return refusal(e.code, e.pointer, { field: e.field });
      }
    }
  }
  throw new Error(`${c.name}: unknown kind ${JSON.stringify(c.kind)}`);
}

/** The corpus's expectation, with Go's omitted empty lists and maps written out. */
function expected(c: HidingCase): unknown {
  const e = c.expect;
  if (e.refusal !== undefined) return refusal(e.refusal.code, e.refusal.pointer, e.refusal);
  switch (c.kind) {
    case "commit":
      return { digest: e.digest, size: e.size, commitments: e.commitments ?? {}, disclosure_base64: e.disclosure_base64 };
    case "derive":
      return { opening: e.opening };
    case "disclose":
      return { disclosed: e.disclosed ?? [], hidden: e.hidden ?? [], ...(e.params_base64 !== undefined ? { params_base64: e.params_base64 } : {}) };
  }
  return e;
}

test("conformance: testdata/conformance/hiding.json", (t) => {
  const cases = corpus<HidingCase>("hiding");
  const failures: string[] = [];
  const counts: Record<string, number> = {};
  const start = process.hrtime.bigint();
  for (const c of cases) {
    counts[c.kind] = (counts[c.kind] ?? 0) + 1;
    let got: unknown;
    try {
      got = run(c);
    } catch (e) {
      failures.push(`${c.name}: ${(e as Error).message}`);
      continue;
    }
    const want = expected(c);
    try {
      assert.deepEqual(got, want);
    } catch {
      failures.push(`${c.name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
    // A disclosure of make_payment written by Go is canonical: parsed and
    // written again here, it is the same bytes.
    if (c.kind === "disclose" && c.expect.refusal === undefined && c.name !== "disclose-spaced") {
      const file = b64(c.disclosure_base64!);
      if (!Disclosure.parse(file).serialize().equals(file)) failures.push(`${c.name}: serialize differs from Go's file`);
    }
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  t.diagnostic(`hiding.json: ${cases.length} cases run (${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")}), ${failures.length} disagree, ${ms.toFixed(1)} ms`);
  for (const k of ["commit", "derive", "disclose"]) assert.ok((counts[k] ?? 0) > 0, `no ${k} case`);
  assert.deepEqual(failures, []);
});
