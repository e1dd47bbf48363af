"""Make the checkout importable as the collection ``ansible_collections.blackwell.sglang``.

``collections/ansible_collections/blackwell/sglang`` is a link back to the repository root, so adding
``collections/`` to ``sys.path`` lets tests import modules and module_utils exactly as Ansible does.
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")

# The bad-input suite (tests/unit/bad_input) ends with a plain closing line ``N passed, N failed``.
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
    # under pytest-xdist the workers see only their share; the controller (no workerinput) sees every report
    if _SEEN and not hasattr(config, "workerinput"):
        sys.stdout.write("\nbad-input suite (tests/unit/bad_input):\n%d passed, %d failed\n"
                         % (_COUNTS["passed"], _COUNTS["failed"]))
        sys.stdout.flush()
