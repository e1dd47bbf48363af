"""Hypothesis settings for the parser fuzz tests (make unit runs them).

One profile, loaded for this directory: derandomized (the same examples on every run and machine, so CI is
reproducible and a failure reproduces locally), no example database written into the checkout, and modest example
counts so the whole directory stays within about 40 s on two cores. Hypothesis' own caches go to the system's temporary
directory, not into the checkout. ``FUZZ_EXAMPLES=<n>`` raises the count for a
longer local hunt (``FUZZ_EXAMPLES=5000 pytest tests/unit/fuzz``).
"""

import os
import sys
import tempfile

# pytest imports every conftest.py as the module "conftest"; tests collected after this directory import these
# names with "from conftest import ...", so they are the same as in tests/unit/conftest.py.
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

try:
    from hypothesis import HealthCheck, settings
    from hypothesis.configuration import set_hypothesis_home_dir
except ImportError:  # the test modules skip themselves (pytest.importorskip)
    settings = None

if settings is not None:
    set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "blackwell-sglang-hypothesis"))
    settings.register_profile(
        "blackwell-fuzz", derandomize=True, database=None, deadline=None, print_blob=True,
        max_examples=int(os.environ.get("FUZZ_EXAMPLES", "200")),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                               HealthCheck.function_scoped_fixture])
    settings.load_profile("blackwell-fuzz")
