"""Reading testdata/conformance (docs/conformance.md)."""

import base64
import json
import os

import _paths


def load(kind):
    """The cases of testdata/conformance/<kind>.json, checked for the
    common format; None when the file is not there yet."""
    path = os.path.join(_paths.CONFORMANCE, kind + ".json")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        doc = json.load(f)
    assert doc["corpus"] == kind and doc["version"] == 1, path
    names = [c["name"] for c in doc["cases"]]
    assert len(set(names)) == len(names), "repeated case names in " + path
    return doc["cases"]


def b64(s):
    return base64.b64decode(s, validate=True)
