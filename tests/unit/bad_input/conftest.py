"""Bad-input suite: import paths. Its closing line ``N passed, N failed`` is printed by tests/unit/conftest.py
(loaded on the pytest-xdist controller too, where the reports of every worker arrive)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# pytest imports every conftest.py as the module "conftest"; tests collected after this directory import these
# names with "from conftest import ...", so they are the same as in tests/unit/conftest.py.
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
