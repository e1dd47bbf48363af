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
