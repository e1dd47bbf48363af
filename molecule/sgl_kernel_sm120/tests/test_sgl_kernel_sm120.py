"""What sgl_kernel_sm120 promises, checked on the converged sandbox container."""

from __future__ import annotations

import glob
import json
import os
import re

import pytest

FACTS = "/var/lib/blackwell-sgl-kernel-facts.json"


@pytest.fixture(scope="module")
def facts(host):
    return json.loads(host.file(FACTS).content_string)


def _py(host, facts, code):
    return host.check_output("%s/bin/python -c %s" % (facts["venv"], _quote(code)))


def _quote(code):
    return "'" + code.replace("'", "'\"'\"'") + "'"


def test_wheel_kept_under_its_build_key(host, facts):
    wheel = host.file(facts["wheel"])
    assert wheel.exists and wheel.size > 0
    assert "/wheels/sgl-kernel/%s/" % facts["build_key"] in facts["wheel"]
    assert host.file(facts["wheel"].rsplit("/", 1)[0] + "/BUILD_KEY").content_string.strip() == facts["build_key"]


def test_only_our_wheel_is_installed(host, facts):
    out = json.loads(_py(host, facts, (
        "import importlib.metadata as m, json\n"
        "d = {}\n"
        "for n in ('sgl-kernel', 'sglang-kernel'):\n"
        "    try:\n"
        "        x = m.distribution(n); d[n] = [x.version, json.loads(x.read_text('direct_url.json'))['url']]\n"
        "    except m.PackageNotFoundError:\n"
        "        d[n] = None\n"
        "print(json.dumps(d))")))
    assert out["sglang-kernel"] is None
    assert out["sgl-kernel"] == ["0.3.21", "file://" + facts["wheel"]]


def test_import_and_fa3_fallback(host, facts):
    out = json.loads(_py(host, facts, (
        "import json, sgl_kernel\n"
        "from sgl_kernel import flash_attn\n"
        "try:\n"
        "    flash_attn.flash_attn_with_kvcache(None, None, None)\n"
        "    err = None\n"
        "except RuntimeError as e:\n"
        "    err = str(e)\n"
        "print(json.dumps({'variant': sgl_kernel.ops_variant, 'ping': sgl_kernel.common_ops.ping(),\n"
        "                  'fa3': flash_attn.FA3_AVAILABLE, 'supported': flash_attn.is_fa3_supported(), 'err': err}))")))
    assert out["variant"] == "sm100" and out["ping"] == "sgl-kernel test fixture"
    assert out["fa3"] is False and out["supported"] is False
    assert "needs the FA3 extension" in out["err"]


def test_sm120_only_build_has_sm120a_cubins_only(host, facts):
    """cuobjdump (NVIDIA's pip wheel, into a throwaway dir) lists the cubins of the installed extension."""
    site = _py(host, facts, "import sgl_kernel, os; print(os.path.dirname(sgl_kernel.__file__))")
    sos = host.check_output("find %s -name '*.so' | sort" % site).splitlines()
    assert [s.split("/sgl_kernel/")[1] for s in sos] == ["sm100/common_ops.abi3.so"]   # no sm90, no flash_ops
    tool = "/tmp/cuobjdump-tool"
    host.check_output("%s/bin/python -m pip install -q --target %s 'nvidia-cuda-cuobjdump>=13.0,<14'"
                      % (facts["venv"], tool))
    exe = host.check_output("find %s -name cuobjdump -type f | head -1" % tool)
    listing = host.check_output("%s --list-elf %s" % (exe, sos[0]))
    archs = sorted(set(re.findall(r"\.(sm_\d+[af]?)\.cubin", listing)))
    assert archs == ["sm_120a"], listing


def test_patched_tree_and_log(host, facts):
    cmake = host.file(facts["source_dir"] + "/sgl-kernel/CMakeLists.txt").content_string
    assert "if(POLICY CMP0169)" in cmake and ">>> blackwell.sglang: cccl_include" in cmake
    log = host.file("/var/log/blackwell-sglang/sgl-kernel-build-%s.log" % facts["build_key"])
    assert log.exists
    text = log.content_string
    assert "CMAKE_POLICY_VERSION_MINIMUM=3.5" in text and "sgl-kernel build finished" in text
    assert re.search(r"CPLUS_INCLUDE_PATH=\S+/include/cccl", text)


def test_wheel_fetched_to_the_controller_artifact_cache(facts):
    """The build host copies its wheel to <fetch_dir>/<key>/ on the controller (fleet distribution, docs/fleet.md)."""
    assert facts["fetch_dir"].startswith(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
    fetched = glob.glob(os.path.join(facts["fetch_dir"], facts["build_key"], "*.whl"))
    assert [os.path.basename(p) for p in fetched] == [os.path.basename(facts["wheel"])]
