"""Bad-input suite (issue 17): a plain closing line ``N passed, N failed`` for the tests of this directory."""

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

_COUNTS = {"passed": 0, "failed": 0}
_SEEN = set()


def pytest_runtest_logreport(report):
    if "bad_input/" not in report.nodeid.replace(os.sep, "/"):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if report.nodeid in _SEEN:
            return
        _SEEN.add(report.nodeid)
        if report.outcome == "passed":
            _COUNTS["passed"] += 1
        elif report.outcome == "failed":
            _COUNTS["failed"] += 1


def pytest_unconfigure(config):
    if _SEEN:
        sys.stdout.write("\nbad-input suite (tests/unit/bad_input):\n%d passed, %d failed\n"
                         % (_COUNTS["passed"], _COUNTS["failed"]))
        sys.stdout.flush()
