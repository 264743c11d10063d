"""The json-module fast path of the reader (canonical._fast) against the
reference tokenizer: on every input of the conformance corpus, and on
seeded mutations of them, both give the same tree (types included) and
canonical bytes, or the same refusal."""

import random
import unittest

import _corpus
from decisionledger import canonical
from decisionledger.canonical import Domain, parse_canonical
from decisionledger.errors import DomainError


def _tagged(v):
    if isinstance(v, dict):
        return ("o", tuple((k, _tagged(x)) for k, x in v.items()))
    if isinstance(v, list):
        return ("a", tuple(_tagged(x) for x in v))
    return (type(v).__name__, v)


def _run(data, domain, fast):
    saved = canonical._FAST
    canonical._FAST = fast
    try:
        tree, out = parse_canonical(data, domain)
        return ("ok", _tagged(tree), out)
    except DomainError as e:
        return ("refused", e.kind, e.pointer, e.key)
    finally:
        canonical._FAST = saved


TOKENS = [b'"\\ud83d"', b'"\\ud83d\\ude02"', b'1e400', b'-0', b'1.0', b'0.5', b'NaN', b'"e\\u0301"', b'"\xc3\xa9"',
          b'"e\xcc\x81"', b'\xed\xa0\x80', b'\xff', b'{"a":1,"a":2}', b'[' * 70 + b']' * 70, b'"\\n\xcc\x81"',
          b'9007199254740992', b'1E+2', b'\xef\xbb\xbf', b'"\\u0000"', b'"\t"', b'{"\\u0061":1,"a":2}', b"1.5e-7",
          b'"\\\\"', b'"\\""', b'"[{"', b'{"k":[{"k":{}}]}']


class FastPath(unittest.TestCase):
    def test_same_as_the_tokenizer(self):
        cases = _corpus.load("digest")
        if cases is None:
            self.skipTest("testdata/conformance/digest.json not there")
        inputs = [(_corpus.b64(c["input_base64"]), c.get("allow_non_integer", False)) for c in cases]
        rnd = random.Random(25)
        small = [d for d, _ in inputs if len(d) < 4096]
        for _ in range(3000):
            d = bytearray(rnd.choice(small))
            for _ in range(rnd.randint(1, 3)):
                at = rnd.randint(0, len(d))
                k = rnd.random()
                if k < 0.4:
                    d[at:at] = rnd.choice(TOKENS)
                elif k < 0.7 and d:
                    del d[min(at, len(d) - 1)]
                elif d:
                    d[min(at, len(d) - 1)] = rnd.randrange(256)
            inputs.append((bytes(d), rnd.random() < 0.3))
        differ = []
        for data, allow in inputs:
            domain = Domain(allow_non_integer=allow)
            a, b = _run(data, domain, True), _run(data, domain, False)
            if a != b:
                differ.append(f"{data[:80]!r} allow={allow}: fast {a!r:.120} reference {b!r:.120}")
        self.assertEqual(differ, [], "\n".join(differ[:10]))


if __name__ == "__main__":
    unittest.main()
