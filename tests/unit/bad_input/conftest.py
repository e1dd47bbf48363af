"""Bad-input suite: import paths. Its closing line ``N passed, N failed`` is printed by tests/unit/conftest.py
(loaded on the pytest-xdist controller too, where the reports of every worker arrive)."""

import os
import sys

import pytest

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


@pytest.fixture(scope="session")
def batches(tmp_path_factory):
    """The run's shared batch results (harness.Batches): under pytest-xdist in the directory every worker's temporary
    directory is made in, named after the run's id, so that the workers of one run share them and no other run does."""
    import harness  # pylint: disable=import-outside-toplevel
    base = tmp_path_factory.getbasetemp()
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return harness.Batches(str(base.parent / ("bad-input-batches-" + uid)) if uid else str(base / "bad-input-batches"))
