"""Locations shared by the tests: the package source and the repository's
testdata, found from this file so the tests run from any directory."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))
TESTDATA = os.path.join(REPO, "testdata")
CONFORMANCE = os.path.join(TESTDATA, "conformance")

src = os.path.join(SDK, "src")
if src not in sys.path:
    sys.path.insert(0, src)
