// Malformed disclosure files: edits of a canonical one and the JSON
// pointer Go's commit.ParseDisclosure names for each (checked against Go
// once, by hand, when this table was written).
import { hide, Opening, type OpeningSource } from "../src/index.js";

/** Fixed openings: every byte of field i's opening (in the order given) is 0xa0 + i. */
export function fixedOpenings(...names: string[]): OpeningSource {
  return { opening: (f: string): Opening => Opening.from(Buffer.alloc(32, 0xa0 + names.indexOf(f))) };
}

export interface Edit {
  name: string;
  /** The parameters committed to, with fixedOpenings of their names in canonical order. */
  params: string;
  /** Replacements applied in turn, each to its first occurrence; a function gets the fields' hex. */
  edits: [string, string][] | ((file: string, hex: { commitment: Record<string, string>; opening: Record<string, string> }) => string);
  pointer: string;
}

const AB = '{"a":1,"b":"x"}';

export const edits: Edit[] = [
  { name: "unknown member", params: AB, edits: [['{"disclosure":2', '{"disclosure":2,"x":1']], pointer: "" },
  { name: "missing member", params: AB, edits: (f) => f.replace(/,"params_size":\d+/, ""), pointer: "" },
  { name: "not an object", params: AB, edits: (f) => `[${f}]`, pointer: "" },
  { name: "format 1", params: AB, edits: [['"disclosure":2', '"disclosure":1']], pointer: "/disclosure" },
  { name: "format as a string", params: AB, edits: [['"disclosure":2', '"disclosure":"2"']], pointer: "/disclosure" },
  { name: "duplicate member", params: AB, edits: [['"disclosure":2', '"disclosure":2,"disclosure":2']], pointer: "/disclosure" },
  { name: "fields not an object", params: "{}", edits: [['"fields":{}', '"fields":[]']], pointer: "/fields" },
  { name: "params_digest not a string", params: AB, edits: (f) => f.replace(/"params_digest":"[^"]*"/, '"params_digest":1'), pointer: "/params_digest" },
  { name: "params_size not an integer", params: AB, edits: (f) => f.replace(/"params_size":(\d+)/, '"params_size":"$1"'), pointer: "/params_size" },
  { name: "a field not an object", params: AB, edits: [['"fields":{', '"fields":{"c":1,']], pointer: "/fields/c" },
  { name: "unknown field member", params: AB, edits: [['"commitment":', '"salt":"00","commitment":']], pointer: "/fields/a" },
  { name: "no commitment", params: AB, edits: (f, h) => f.replace(`"commitment":"${h.commitment["a"]}",`, ""), pointer: "/fields/a" },
  { name: "upper-case commitment", params: AB, edits: (f, h) => f.replace(h.commitment["b"]!, h.commitment["b"]!.toUpperCase()), pointer: "/fields/b/commitment" },
  { name: "short commitment", params: AB, edits: (f, h) => f.replace(h.commitment["b"]!, h.commitment["b"]!.slice(1)), pointer: "/fields/b/commitment" },
  { name: "opening without value", params: AB, edits: [[',"value":1', ""]], pointer: "/fields/a" },
  { name: "value without opening", params: AB, edits: (f, h) => f.replace(`,"opening":"${h.opening["b"]}"`, ""), pointer: "/fields/b" },
  { name: "upper-case opening", params: AB, edits: (f, h) => f.replace(h.opening["a"]!, h.opening["a"]!.toUpperCase()), pointer: "/fields/a/opening" },
  { name: "long opening", params: AB, edits: (f, h) => f.replace(h.opening["a"]!, h.opening["a"]! + "0"), pointer: "/fields/a/opening" },
  { name: "value outside the domain", params: AB, edits: [['"value":1', '"value":1.5']], pointer: "/fields/a/value" },
  { name: "value not NFC", params: AB, edits: [['"value":"x"', '"value":"e\\u0301"']], pointer: "/fields/b/value" },
  { name: "version 1 digest", params: AB, edits: [['"v2:sha256:', '"sha256:']], pointer: "/params_digest" },
  { name: "wrong size", params: AB, edits: (f) => f.replace(/"params_size":(\d+)/, (_, n: string) => `"params_size":${Number(n) + 1}`), pointer: "/params_digest" },
  { name: "size with a fraction", params: AB, edits: (f) => f.replace(/"params_size":(\d+)/, '"params_size":$1.5'), pointer: "/params_size" },
  { name: "another commitment", params: AB, edits: (f, h) => f.replace(h.commitment["b"]!, h.commitment["a"]!), pointer: "/params_digest" },
  { name: "a field fault before the digest's", params: AB, edits: [[',"value":1', ""], ['"v2:sha256:', '"sha256:']], pointer: "/fields/a" },
  {
    name: "the first field in canonical order, not in the file's",
    params: '{"b":1,"a":2}',
    edits: (f) => {
      const m = /"fields":\{("a":\{[^}]*\}),("b":\{[^}]*\})\}/.exec(f)!;
      return f.replace(m[0], `"fields":{${m[2]},${m[1]}}`).replace(',"value":2', "").replace(',"value":1', "");
    },
    pointer: "/fields/a",
  },
  { name: "a name with / and ~", params: '{"a/b":1,"~":2}', edits: [[',"value":1', ""]], pointer: "/fields/a~1b" },
];

/** The edited file of an Edit. */
export function editedFile(e: Edit): Buffer {
  const names = Object.keys(JSON.parse(e.params) as object).sort();
  const whole = hide(e.params, fixedOpenings(...names)).disclosure.serialize().toString("utf8");
  const doc = JSON.parse(whole) as { fields: Record<string, { commitment: string; opening: string }> };
  const hex = { commitment: {} as Record<string, string>, opening: {} as Record<string, string> };
  for (const [n, f] of Object.entries(doc.fields)) {
    hex.commitment[n] = f.commitment;
    hex.opening[n] = f.opening;
  }
  let file = whole;
  if (typeof e.edits === "function") {
    file = e.edits(file, hex);
  } else {
    for (const [from, to] of e.edits) file = file.replace(from, to);
  }
  if (file === whole) throw new Error(`${e.name}: the edit changes nothing`);
  return Buffer.from(file, "utf8");
}
