"""First-set kinds whose handling had no unit test of its own: B30 (memlock under systemd) and B32 (kernel headers
for a DKMS rebuild)."""

import os

from conftest import ROOT
from ansible_collections.blackwell.sglang.plugins.filter.preflight import preflight_evaluate
from ansible_collections.blackwell.sglang.plugins.module_utils import _journal


def test_b30_unit_sets_memlock_and_the_line_is_classified():
    with open(os.path.join(ROOT, "roles", "sglang_service", "templates", "sglang.service.j2")) as handle:
        lines = [line.strip() for line in handle]
    assert "LimitMEMLOCK=infinity" in lines
    assert _journal.classify(["ibv_create_cq: Cannot allocate memory"])["cause"] == "memlock_too_low"


def test_b32_missing_headers_warn_before_any_driver_change():
    host = {"kernel": {"release": "6.17.9-76061709-generic", "machine": "x86_64", "headers_present": False}}
    result = preflight_evaluate({}, {}, host, {"require_gpu": False, "distribution": {
        "system": "Linux", "distribution": "Ubuntu", "version": "24.04", "architecture": "x86_64"}})
    check = [c for c in result["checks"] if c["name"] == "kernel_headers"][0]
    assert check["status"] == "warn"
    assert "linux-headers-6.17.9-76061709-generic" in check["remedy"]
