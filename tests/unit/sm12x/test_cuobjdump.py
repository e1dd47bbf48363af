"""The cuobjdump parser and the wheel arch check (module_utils/_cuobjdump.py, module blackwell.sglang.library_archs).

Recorded input: tests/fixtures/gpu/sgl_kernel_0307_sm120a/cuobjdump-list-elf.txt, `cuobjdump --list-elf` over every
library of the sgl-kernel 0.3.21 wheel built for sm_120a on the GPU machine (one `## <path>` header per library).
That wheel must pass for the targets [sm_120a] and fail, naming common_ops and spatial_ops, for [sm_120a, sm_121a]:
sm_120a code never counts for compute capability 12.1 (field report S13). Second recorded input:
tests/fixtures/gpu/sgl_kernel_loads_h200/current/cuobjdump-list-elf.txt, the current pin's wheel built through the
role for [sm_120a, sm_121a] on the (x86_64) GPU machine: it passes for both."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _cuobjdump

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

RECORDED = os.path.join(FIXTURES, "gpu", "sgl_kernel_0307_sm120a", "cuobjdump-list-elf.txt")


def _recorded():
    with open(RECORDED) as fh:
        return _cuobjdump.parse_multi(fh.read())


def test_recorded_listing_parses_per_library():
    libs = _recorded()
    common = libs["./sgl_kernel/sm100/common_ops.abi3.so"]
    assert common["elf"] == ["sm_120a"] and common["cubins"] == 61 and common["device_code"] is True
    assert libs["./sgl_kernel/spatial_ops.abi3.so"]["elf"] == ["sm_120a"]
    assert libs["./deep_gemm/deep_gemm_cpp.abi3.so"]["device_code"] is False
    assert libs["./lib/mscclpp.so"]["elf"] == ["sm_80", "sm_90"]


def test_recorded_wheel_covers_sm120a_but_not_sm121a():
    libs = dict((k, v) for k, v in _recorded().items() if "mscclpp" not in k)
    assert _cuobjdump.check_libraries(libs, ["sm_120a"])["failed"] == []
    result = _cuobjdump.check_libraries(libs, ["sm_120a", "sm_121a"])
    failed = sorted(r["path"] for r in result["failed"])
    assert failed == ["./sgl_kernel/sm100/common_ops.abi3.so", "./sgl_kernel/spatial_ops.abi3.so"]
    assert all(r["missing"] == ["sm_121a"] for r in result["failed"])
    assert "common_ops.abi3.so has no code for sm_121a (it holds sm_120a)" in result["message"]


def test_recorded_dual_arch_wheel_covers_both():
    with open(os.path.join(FIXTURES, "gpu", "sgl_kernel_loads_h200", "current", "cuobjdump-list-elf.txt")) as fh:
        libs = _cuobjdump.parse_multi(fh.read())
    assert sorted(libs) == ["sgl_kernel/infllm_ops.cpython-312-x86_64-linux-gnu.so",
                            "sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/spatial_ops.abi3.so"]
    assert all(lib["elf"] == ["sm_120a", "sm_121a"] for lib in libs.values())
    result = _cuobjdump.check_libraries(libs, ["sm_120a", "sm_121a"])
    assert result["failed"] == []
    # one target the wheel was not built for still fails, naming every library
    assert len(_cuobjdump.check_libraries(libs, ["sm_100a"])["failed"]) == 3


def test_mscclpp_cubins_of_other_archs_do_not_cover_sm12x_without_ptx():
    libs = _recorded()
    mscclpp = libs["./lib/mscclpp.so"]
    assert _cuobjdump.coverage(mscclpp, ["sm_120a"])["missing"] == ["sm_120a"]
    # with its compute_90 PTX (as --list-ptx lists it), the driver JIT covers it, reported as PTX only
    with_ptx = dict(mscclpp, ptx=["compute_90"])
    cov = _cuobjdump.coverage(with_ptx, ["sm_120a", "sm_121a"])
    assert cov["missing"] == [] and cov["ptx_only"] == ["sm_120a", "sm_121a"]


@pytest.mark.parametrize("elf,ptx,target,covered,kind", [
    (["sm_120a"], [], "sm_121a", False, None),        # S13: never
    (["sm_121a"], [], "sm_121a", True, "exact"),
    (["sm_120f"], [], "sm_121a", True, "family"),     # the family cubin runs on 12.0 and 12.1
    (["sm_120f"], [], "sm_120a", True, "family"),
    (["sm_121a"], [], "sm_120a", False, None),
    ([], ["compute_120a"], "sm_121a", False, None),   # arch-specific PTX is not forward compatible
    ([], ["compute_120"], "sm_121a", True, "ptx"),
    (["sm_100a", "sm_90"], [], "sm_120a", False, None),
])
def test_coverage_rule(elf, ptx, target, covered, kind):
    cov = _cuobjdump.coverage({"elf": elf, "ptx": ptx}, [target])
    assert (target in cov["covered"]) is covered
    if covered:
        assert cov["covered"][target]["kind"] == kind


def test_single_file_listing_and_ptx():
    text = ("ELF file    1: common_ops.abi3.1.sm_120a.cubin\nELF file    2: common_ops.abi3.2.sm_121a.cubin\n"
            "PTX file    1: mscclpp.1.sm_90.ptx\n")
    listing = _cuobjdump.parse_listing(text)
    assert listing == {"elf": ["sm_120a", "sm_121a"], "ptx": ["compute_90"], "cubins": 2, "device_code": True}
    assert _cuobjdump.parse_listing("cuobjdump info    : File '/x.so' does not contain device code\n")[
        "device_code"] is False


# --- the module through ansible, with a stand-in cuobjdump answering from the recorded listing ----------------------

def _site(tmp_path, libs):
    site = tmp_path / "site"
    info = site / "sgl_kernel-0.3.21.dist-info"
    info.mkdir(parents=True)
    for rel in libs:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy("/bin/true", str(path))  # any ELF file: the stand-in cuobjdump answers by its name
    (info / "RECORD").write_text("".join("%s,,\n" % rel for rel in libs + ["sgl_kernel-0.3.21.dist-info/RECORD"]))
    return site


def _stand_ins(tmp_path, site, answers):
    python = tmp_path / "python"
    python.write_text("#!%s\nimport json\nprint(json.dumps({'path': [%r]}))\n" % (sys.executable, str(site)))
    python.chmod(0o755)
    data = tmp_path / "answers.json"
    data.write_text(json.dumps(answers))
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!%s\nimport json, os, sys\nflag, path = sys.argv[1], sys.argv[2]\n"
                    "answers = json.load(open(%r))\nname = os.path.basename(path)\n"
                    "print(answers.get(flag, {}).get(name, \"cuobjdump info    : File '%%s' does not contain device "
                    "code\" %% path))\n" % (sys.executable, str(data)))
    tool.chmod(0o755)
    return str(python), str(tool)


def _module(tmp_path, args):
    exe = os.path.join(os.path.dirname(sys.executable), "ansible")
    if not os.path.exists(exe):
        pytest.skip("ansible is not next to this Python")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([exe, "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                           "-m", "blackwell.sglang.library_archs", "-a", json.dumps(args)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    try:
        doc = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]
    except ValueError:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return doc["plays"][0]["tasks"][0]["hosts"]["localhost"]


def _recorded_answers():
    with open(RECORDED) as fh:
        text = fh.read()
    blocks, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = os.path.basename(line[3:].strip())
            blocks[current] = []
        elif current:
            blocks[current].append(line)
    return {"--list-elf": dict((k, "\n".join(v)) for k, v in blocks.items())}


LIBS = ["sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/spatial_ops.abi3.so", "deep_gemm/deep_gemm_cpp.abi3.so"]


def test_module_fails_naming_the_libraries_without_sm121a(tmp_path):
    site = _site(tmp_path, LIBS)
    python, tool = _stand_ins(tmp_path, site, _recorded_answers())
    res = _module(tmp_path, {"python": python, "distributions": ["sgl-kernel", "sglang-kernel"],
                             "target_archs": ["sm_120a", "sm_121a"], "cuobjdump": tool})
    assert res.get("failed") is True, res
    assert sorted(res["missing"]) == ["sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/spatial_ops.abi3.so"]
    assert "sgl_kernel/sm100/common_ops.abi3.so has no code for sm_121a" in res["msg"]
    ok = _module(tmp_path, {"python": python, "distributions": ["sgl-kernel"], "target_archs": ["sm_120a"],
                            "cuobjdump": tool})
    assert not ok.get("failed") and ok["archs"] == ["sm_120a"], ok
    assert "2 of 3 libraries hold device code" in ok["msg"]


def test_module_with_both_archs_passes_and_skips_without_cuobjdump(tmp_path):
    site = _site(tmp_path, LIBS[:2])
    both = "ELF file    1: x.1.sm_120a.cubin\nELF file    2: x.2.sm_121a.cubin\n"
    python, tool = _stand_ins(tmp_path, site, {"--list-elf": {"common_ops.abi3.so": both, "spatial_ops.abi3.so": both}})
    res = _module(tmp_path, {"python": python, "distributions": ["sgl-kernel"], "target_archs": ["sm_120a", "sm_121a"],
                             "cuobjdump": tool})
    assert not res.get("failed") and res["missing"] == {} and res["archs"] == ["sm_120a", "sm_121a"], res
    skipped = _module(tmp_path, {"python": python, "distributions": ["sgl-kernel"], "target_archs": ["sm_121a"],
                                 "cuobjdump": str(tmp_path / "no-cuobjdump")})
    assert skipped["skipped"] is True and not skipped.get("failed")
