import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Declaration, DeclarationError } from "../src/index.js";
import { repoFile } from "./testutil.js";

const vectorsDir = new URL("../../test/vectors/", import.meta.url);
const read = (name: string): any => JSON.parse(readFileSync(new URL(name, vectorsDir), "utf8"));

test("projection vectors (commit/declare TestProjectionVectors)", () => {
  const { cases } = read("projection-vectors.json") as {
    cases: { name: string; field: string; value: string; allowlists: Record<string, string[]> | null; want: string }[];
  };
  assert.ok(cases.length >= 55, `${cases.length} cases`);
  for (const c of cases) {
    const d = Declaration.parse(`{"declaration":1,"action":"t","fields":{"f":${c.field}}}`);
    const params = c.value === "" ? "{}" : `{"f":${c.value}}`;
    const opts = c.allowlists === null ? {} : { allowlists: c.allowlists };
    if (c.want.startsWith("refused: ")) {
      assert.throws(
        () => d.minimize(params, opts),
        (e: unknown) => e instanceof DeclarationError && e.pointer === "/f" && e.problem.includes(c.want.slice(9)),
        c.name,
      );
    } else {
      assert.equal(d.minimize(params, opts).attributes.toString("utf8"), c.want, c.name);
    }
  }
});

test("declaration corpus (commit/declare TestCorpus)", () => {
  const { corpus } = read("declare-vectors.json") as {
    corpus: { action: string; table: string; tiers_digest: string; params: string; params_digest: string; params_size: number; attributes: string }[];
  };
  assert.equal(corpus.length, 5);
  for (const c of corpus) {
    const d = Declaration.parse(repoFile(`testdata/declarations/${c.action}.json`));
    assert.equal(d.tierTable().toString("utf8"), c.table, c.action);
    assert.equal(d.tiersDigest(), c.tiers_digest, c.action);
    const r = d.minimize(c.params, { allowlists: { payees: ["DE89370400440532013000"] } });
    assert.equal(r.attributes.toString("utf8"), c.attributes, c.action);
    assert.equal(r.params.digest, c.params_digest, c.action);
    assert.equal(r.params.size, c.params_size, c.action);
    assert.equal(r.tiersDigest, c.tiers_digest, c.action);
  }
});

test("definition digest vectors (commit/declare TestDefinitionDigestVectors)", () => {
  const { definitions } = read("declare-vectors.json") as {
    definitions: { name: string; decl: string | { file: string; replace?: [string, string] }; canonical: string; digest: string }[];
  };
  assert.equal(definitions.length, 11);
  for (const c of definitions) {
    let text: string;
    if (typeof c.decl === "string") text = c.decl;
    else {
      text = repoFile(c.decl.file).toString("utf8");
      if (c.decl.replace) {
        assert.ok(text.includes(c.decl.replace[0]), c.name);
        text = text.replace(c.decl.replace[0], c.decl.replace[1]);
      }
    }
    const d = Declaration.parse(text);
    assert.equal(d.canonical().toString("utf8"), c.canonical, c.name);
    assert.equal(d.definitionDigest(), c.digest, c.name);
  }
});

test("declarations refused, naming where", () => {
  const refused = (text: string, pointer: string): void => {
    assert.throws(
      () => Declaration.parse(text),
      (e: unknown) => e instanceof DeclarationError && e.code === "declaration_invalid" && e.pointer === pointer,
      `${text} at ${pointer}`,
    );
  };
  const f = (field: string): string => `{"declaration":1,"action":"a","fields":{"x":${field}}}`;
  refused(`{"declaration":2,"action":"a","fields":{}}`, "/declaration");
  refused(`{"declaration":1.0,"action":"a","fields":{}}`, "");
  refused(`{"declaration":1,"action":"a b","fields":{}}`, "/action");
  refused(`{"declaration":1,"action":"a","fields":{}}`, "/fields");
  refused(`{"declaration":1,"action":"a","reviewed":null,"fields":{"x":{"type":"string","tier":"policy"}}}`, "/reviewed");
  refused(`{"declaration":1,"action":"a","extra":1,"fields":{}}`, "");
  refused(f(`{"type":"json","tier":"policy"}`), "/fields/x/tier");
  refused(f(`{"type":"string","tier":"derived","projections":["count"]}`), "/fields/x/projections/0");
  refused(f(`{"type":"string","tier":"derived","projections":["byte_size","byte_size"]}`), "/fields/x/projections/1");
  refused(f(`{"type":"string","tier":"derived","projections":["route_shape"]}`), "/fields/x/routes");
  refused(f(`{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/a/{B}"]}`), "/fields/x/routes/0");
  refused(f(`{"type":"string","tier":"derived","projections":["payee_known"]}`), "/fields/x/allowlist");
  refused(`{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","x":1}}}`, "");
  refused(`{"declaration":1,"action":"a","fields":{"a-b":{"type":"string","tier":"policy"}}}`, "/fields/a-b");
  // encoding/json matches member names without regard to case, as Go does.
  assert.equal(Declaration.parse(`{"Declaration":1,"ACTION":"a","fields":{"x":{"Type":"string","tier":"policy"}}}`).action, "a");
});

test("minimize refuses, naming the declared field and never a value", () => {
  const d = Declaration.parse(repoFile("testdata/declarations/send_email.json"));
  const refused = (params: string, code: string, pointer: string): void => {
    assert.throws(
      () => d.minimize(params),
      (e: unknown) => {
        assert.ok(e instanceof DeclarationError);
        assert.deepEqual([e.code, e.pointer], [code, pointer], params);
        assert.ok(!e.message.includes("secret"), e.message);
        return true;
      },
    );
  };
  refused(`{"body":"b","recipient":"secret@example.com"}`, "field_absent", "/subject");
  refused(`{"body":"b","recipient":"secret","subject":"s"}`, "projection_refused", "/recipient");
  refused(`{"body":1,"recipient":"a@example.com","subject":"s"}`, "field_type", "/body");
  refused(`{"body":"b","recipient":"a@example.com","subject":"s","secret":"e\u0301"}`, "domain:not_nfc", "(an undeclared field)");
  refused(`{"body":"b","recipient":"a@example.com","subject":"e\u0301"}`, "domain:not_nfc", "/subject");
  refused(`[]`, "domain:not_object", "");
});

test("the disclosure floor (docs/declarations.md §6) refuses a declaration past it, before the parameters", () => {
  const d = Declaration.parse(repoFile("testdata/declarations/make_payment.json"));
  const params = repoFile("testdata/calls/make_payment.json");
  const refused = (floor: Record<string, Record<string, "policy" | "derived" | "payload">>, pointer: string): void => {
    assert.throws(
      () => d.minimize("not even JSON", { floor }),
      (e: unknown) => e instanceof DeclarationError && e.code === "floor_exceeded" && e.pointer === pointer,
      JSON.stringify(floor),
    );
  };
  refused({ make_payment: { amount_minor: "derived" } }, "/fields/amount_minor/tier");
  refused({ make_payment: { "*": "payload", amount_minor: "policy", currency: "policy" } }, "/fields/payee/tier");
  assert.doesNotThrow(() => d.minimize(params, { floor: { make_payment: { "*": "policy" } } }));
  assert.doesNotThrow(() => d.minimize(params, { floor: { send_email: { "*": "payload" } } }));
});
