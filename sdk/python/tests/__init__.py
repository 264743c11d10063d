# The tests import their helpers (_paths, _corpus) as top-level modules,
# whichever way unittest finds them: `python3 -m unittest` in sdk/python
# imports this package first, `-s tests` puts this directory on the path.
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)
