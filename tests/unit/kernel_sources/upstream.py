"""Where the upstream source bundle is (``../shared/upstream`` beside the checkout; BLACKWELL_UPSTREAM overrides)."""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
UPSTREAM = os.environ.get("BLACKWELL_UPSTREAM") or os.path.join(os.path.dirname(ROOT), "shared", "upstream")
ORIGINAL = "sglang-2026-03-07-d28f35240a.tar.gz"
CURRENT = "sglang-2026-08-18-d55f1c28e2.tar.gz"
SKIP_REASON = ("the upstream source bundle is absent (looked in %s; set BLACKWELL_UPSTREAM): the real SGLang trees "
               "and their FetchContent sources are only there (CI has it; a user's clone may not)" % UPSTREAM)


def have_bundle():
    return os.path.isfile(os.path.join(UPSTREAM, "manifest.json"))
