"""The sgl-kernel wheels built on the GPU machine through the role load: the role's check and ``nm`` agree.

Evidence: ``tests/fixtures/gpu/sgl_kernel_loads_h200/<pin>/``, written by ``tests/gpu/run_kernel_build.sh finish``
on the H200 (CUDA 13.0, torch 2.11+cu130) from the wheel the role built (the original pin for ``sm_120a``, the current pin for ``sm_120a`` and
``sm_121a``):

- ``library-symbols.json``: the ``blackwell.sglang.library_symbols`` result of the role's verification;
- ``nm-undefined.txt``: ``nm -D --undefined-only | c++filt`` of every ``*.so`` in the unpacked wheel;
- ``load-no-gpu.txt``: ``import sgl_kernel`` and ``ctypes.CDLL(..., RTLD_NOW)`` of each library with no GPU visible
  (sgl_kernel's loader then picks ``sm100/``, the variant SM12x hosts load);
- ``cuobjdump-list-elf.txt``: the cubins of every library;
- ``kernel-build-result.json``: the role's result (its arch check included, where it ran).

A pin whose directory is absent was not rebuilt with the evidence kept; only the pins present are checked, and the
original pin must be present.
"""
import collections
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EVIDENCE = os.path.join(ROOT, "tests", "fixtures", "gpu", "sgl_kernel_loads_h200")
PINS = sorted(d for d in os.listdir(EVIDENCE) if os.path.isdir(os.path.join(EVIDENCE, d)))
SPARSE = re.compile(r"mha_(varlen_)?fwd_sparse")


def _read(pin, name):
    with open(os.path.join(EVIDENCE, pin, name), encoding="utf-8") as f:
        return f.read()


def _nm_sections(text):
    """{library path in the wheel: Counter of nm symbol kinds ('U', 'w', ...)} and {path: [symbol lines]}."""
    kinds, lines, cur = {}, {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:].strip()
            kinds[cur], lines[cur] = collections.Counter(), []
        elif line.strip() and cur is not None:
            kind, symbol = line.split(None, 1)
            kinds[cur][kind] += 1
            lines[cur].append(symbol)
    return kinds, lines


def test_original_pin_evidence_is_kept():
    assert "original" in PINS


@pytest.mark.parametrize("pin", PINS)
def test_role_check_finds_no_unresolved_symbol(pin):
    result = json.loads(_read(pin, "library-symbols.json"))
    assert result["unresolved"] == 0, result["msg"]
    libraries = {lib["path"]: lib for lib in result["libraries"]}
    assert "sgl_kernel/sm100/common_ops.abi3.so" in libraries
    for path, lib in libraries.items():
        assert lib["unresolved"] == [] and lib["missing_libraries"] == [], path


@pytest.mark.parametrize("pin", PINS)
def test_nm_agrees_with_the_role_check(pin):
    """Every library nm read was checked, with the same count of strong undefined symbols; none is sparse FA."""
    checked = {lib["path"]: lib["undefined"] for lib in json.loads(_read(pin, "library-symbols.json"))["libraries"]}
    kinds, lines = _nm_sections(_read(pin, "nm-undefined.txt"))
    assert kinds, "nm-undefined.txt holds no library"
    for path, counter in kinds.items():
        assert path in checked, "nm read %s, the role's check did not" % path
        # nm lists weak references as 'w': the check leaves them out (the loader does not require them)
        assert counter["U"] == checked[path], path
        assert not [s for s in lines[path] if SPARSE.search(s)], path


@pytest.mark.parametrize("pin", PINS)
def test_real_load_with_rtld_now(pin):
    text = _read(pin, "load-no-gpu.txt")
    assert "import sgl_kernel ok" in text
    assert "RTLD_NOW ok: sm100/common_ops.abi3.so" in text
    assert "fwd_sparse registered: False varlen_fwd_sparse registered: False" in text
    assert "Traceback" not in text


def _cubin_archs(pin):
    """{library path in the wheel: set of cubin archs} from cuobjdump-list-elf.txt."""
    archs, cur = collections.defaultdict(set), None
    for line in _read(pin, "cuobjdump-list-elf.txt").splitlines():
        if line.startswith("## "):
            cur = line[3:].strip()
        elif cur:
            archs[cur].update(re.findall(r"\.(sm_\d+[a-z]?)\.cubin", line))
    return {path: a for path, a in archs.items() if path.startswith("sgl_kernel/") and a}


def _target_archs(pin):
    """The archs the role was asked to build: its arch check's ``archs`` (absent from results recorded before the
    check existed, which were built for ``sm_120a`` alone)."""
    result = json.loads(_read(pin, "kernel-build-result.json"))
    return set((result.get("library_archs") or {}).get("archs") or ["sm_120a"])


@pytest.mark.parametrize("pin", PINS)
def test_sgl_kernel_cubins_are_the_target_archs(pin):
    """sgl_kernel's own libraries carry cubins of exactly the target archs (mscclpp's sub-project sets its own archs
    and PTX), every target in every library."""
    own = _cubin_archs(pin)
    assert "sgl_kernel/sm100/common_ops.abi3.so" in own
    targets = _target_archs(pin)
    assert all(a == targets for a in own.values()), (targets, own)


@pytest.mark.parametrize("pin", [p for p in PINS if "library_archs" in _read(p, "kernel-build-result.json")])
def test_role_arch_check_agrees_with_cuobjdump(pin):
    """The role's arch check read the same libraries and the same archs as cuobjdump on the unpacked wheel."""
    checked = json.loads(_read(pin, "kernel-build-result.json"))["library_archs"]
    assert not checked["failed"]
    own = _cubin_archs(pin)
    device = {lib["path"]: set(lib["elf"]) for lib in checked["libraries"] if lib["device_code"]}
    assert device == own
    for lib in checked["libraries"]:
        assert lib["missing"] == [], lib["path"]


def test_current_pin_wheel_holds_sm_121a():
    """The current pin built for the whole SM12x family on an x86_64 host: sm_121a is in the wheel, not only the key."""
    if "current" not in PINS:
        pytest.skip("the current pin's evidence is not kept")
    assert _target_archs("current") == {"sm_120a", "sm_121a"}
    assert all("sm_121a" in a for a in _cubin_archs("current").values())
