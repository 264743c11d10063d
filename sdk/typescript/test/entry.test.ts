import { test } from "node:test";
import assert from "node:assert/strict";
import { parseEntry, EntryError, parse, JsonNumber, type JsonObject, type JsonValue } from "../src/index.js";
import { serializeChecked } from "../src/canonical.js";
import { repoFile } from "./testutil.js";

const example = repoFile("testdata/entry/example.json");

function mutated(f: (m: JsonObject) => void): Buffer {
  const m = parse(example) as JsonObject;
  f(m);
  return Buffer.from(serializeChecked(m), "utf8");
}

test("entries refused by the strict decoder, naming the member", () => {
  const refused = (name: string, b: Buffer, field: string): void => {
    assert.throws(() => parseEntry(b), (e: unknown) => e instanceof EntryError && e.field === field, name);
  };
  assert.equal(parseEntry(example).index, 0);
  refused("an unknown member", mutated((m) => m.set("extra", "x")), "extra");
  refused("a missing member", mutated((m) => m.delete("mediator")), "mediator");
  refused("version 1 with definition_digest", mutated((m) => m.set("definition_digest", "sha256:" + "1".repeat(64))), "definition_digest");
  refused("version 2 without definition_digest", mutated((m) => m.set("version", new JsonNumber("2", "2"))), "definition_digest");
  refused("an unknown version", mutated((m) => m.set("version", new JsonNumber("9", "9"))), "version");
  refused("policies out of order", mutated((m) => m.set("policies", ["b", "a"])), "policies");
  refused("policies repeated", mutated((m) => m.set("policies", ["a", "a"])), "policies");
  refused("a bidi override in an identifier", mutated((m) => m.set("principal", "agent:\u202eevil")), "principal");
  refused("an empty identifier", mutated((m) => m.set("mediator", "")), "mediator");
  refused("a time without microseconds", mutated((m) => m.set("time", "2026-11-29T12:00:00Z")), "time");
  refused("February 30", mutated((m) => m.set("time", "2026-02-30T12:00:00.000000Z")), "time");
  refused("an upper-case digest", mutated((m) => m.set("params_digest", "sha256:" + "A".repeat(64))), "params_digest");
  refused("a short signature", mutated((m) => m.set("sig", "AAAA")), "sig");
  refused("an unknown decision", mutated((m) => m.set("decision", "maybe")), "decision");
  refused("params_size 1", mutated((m) => m.set("params_size", new JsonNumber("1", "1"))), "params_size");
  refused("a version 3 entry without kind", mutated((m) => m.set("version", new JsonNumber("3", "3"))), "kind");
  refused("not canonical (a space)", Buffer.from(example.toString("utf8").replace('"action":', '"action": ')), "");
  refused("not canonical (members reordered)", Buffer.from('{"version":1,' + example.toString("utf8").slice(1).replace(',"version":1', "")), "");
  refused("a trailing newline", Buffer.concat([example, Buffer.from("\n")]), "");
});

test("the signed message leaves out sig and only sig", () => {
  const e = parseEntry(example);
  const text = e.message.toString("utf8");
  assert.ok(text.startsWith("ledger/v1/entry\n{"));
  const body = parse(text.slice("ledger/v1/entry\n".length)) as Map<string, JsonValue>;
  assert.equal(body.has("sig"), false);
  assert.equal(body.size, (parse(example) as JsonObject).size - 1);
});
