"""Stamps of the no-op converge: module_utils._venv_state with its reader run by this interpreter.

The "venv" is this test interpreter with a temporary site directory of real dist-info folders put first on
PYTHONPATH; the reader reads them with importlib.metadata exactly as on a host. Every test that shows a skip also
shows the change that invalidates it (a pin, a removed or changed package, an input such as a flag or the index).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import ansible_run
from _dist_info import dist as _dist, remove as _remove
from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_state as vs


@pytest.fixture(name="site")
def _site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _dist(site, "demo-torch", "2.10.0.dev20251201+cu130", requires=["demo-filelock>=3", 'demo-win; sys_platform == "win32"'])
    _dist(site, "demo-filelock", "3.20.0")
    _dist(site, "demo-flashinfer-python", "0.6.3", requires=["demo-torch", 'demo-extra-dep; extra == "fast"'])
    _dist(site, "demo-extra-dep", "1.0")
    return site


@pytest.fixture(name="run")
def _run(site):
    env = dict(os.environ, PYTHONPATH=str(site))

    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    return run


PINS = ["demo-torch==2.10.0.dev20251201+cu130"]
INPUTS = {"specs": PINS, "index": "https://download.pytorch.org/whl/nightly/cu130"}


def _stamp(run, requirements=None, inputs=None, names=()):
    requirements = PINS if requirements is None else requirements
    inputs = INPUTS if inputs is None else inputs
    state = vs.read_state(run, sys.executable, requirements, names)
    return vs.build_stamp(vs.inputs_digest(inputs, sys.executable), state)


def _check(run, stamp, requirements=None, inputs=None, names=()):
    requirements = PINS if requirements is None else requirements
    inputs = INPUTS if inputs is None else inputs
    state = vs.read_state(run, sys.executable, requirements, names)
    return vs.evaluate(stamp, vs.inputs_digest(inputs, sys.executable), state)


def test_reader_follows_the_closure_and_markers(run):
    state = vs.read_state(run, sys.executable, ["demo-flashinfer-python==0.6.3"])
    assert state["packaging"] is True
    assert state["missing"] == [] and state["unsatisfied"] == []
    # torch and its dependency come in through Requires-Dist; the win32-only and the extra-only deps do not
    assert set(state["closure"]) == {"demo-flashinfer-python", "demo-torch", "demo-filelock"}
    assert state["distributions"]["demo-filelock"] == "3.20.0"
    assert len(state["closure"]["demo-torch"]["record"]) == 64


def test_extras_bring_their_dependencies(run):
    state = vs.read_state(run, sys.executable, ["demo-flashinfer-python[fast]==0.6.3"])
    assert "demo-extra-dep" in state["closure"]


def test_converged_rerun_matches(run):
    assert _check(run, _stamp(run)) == (True, [])


def test_no_stamp_is_a_miss(run):
    assert _check(run, None) == (False, ["no stamp"])


def test_changed_pin_runs_again(run):
    matched, reasons = _check(run, _stamp(run), requirements=["demo-torch==2.11.0"], inputs=dict(INPUTS, specs=["demo-torch==2.11.0"]))
    assert not matched
    assert "the inputs changed" in reasons
    assert any(r.startswith("not satisfied: demo-torch==2.11.0 (installed 2.10.0.dev20251201+cu130)") for r in reasons)


def test_changed_index_runs_again(run):
    matched, reasons = _check(run, _stamp(run), inputs=dict(INPUTS, index="https://pypi.org/simple"))
    assert (matched, reasons) == (False, ["the inputs changed"])


def test_removed_dependency_runs_again(run, site):
    stamp = _stamp(run)
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    matched, reasons = _check(run, stamp)
    assert not matched
    assert "not installed: demo-filelock>=3" in reasons


def test_removed_pinned_package_runs_again(run, site):
    stamp = _stamp(run)
    _remove(next(site.glob("demo_torch-*.dist-info")))
    matched, reasons = _check(run, stamp)
    assert not matched and "not installed: demo-torch==2.10.0.dev20251201+cu130" in reasons


def test_changed_dependency_version_runs_again(run, site):
    stamp = _stamp(run)
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    _dist(site, "demo-filelock", "3.21.0")
    matched, reasons = _check(run, stamp)
    assert (matched, reasons) == (False, ["the installed distributions changed"])


def test_reinstalled_files_run_again(run, site):
    stamp = _stamp(run)
    record = next(site.glob("demo_torch-*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "demo-torch/extra.so,sha256=x,1\n")
    assert _check(run, stamp) == (False, ["the installed distributions changed"])


def test_unrelated_package_does_not_invalidate(run, site):
    stamp = _stamp(run)
    _dist(site, "demo-unrelated", "9.9")
    assert _check(run, stamp) == (True, [])


def test_probe_stamp_on_argv_and_names(run, site):
    argv = ["--model-path", "/m", "--tp-size", "2"]
    state = vs.read_state(run, sys.executable, names=["demo-flashinfer-python"])
    stamp = vs.build_stamp(vs.inputs_digest({"argv": argv}, sys.executable), state, result={"ok": True})
    assert _check(run, stamp, requirements=[], inputs={"argv": argv}, names=["demo-flashinfer-python"]) == (True, [])
    changed_flag = ["--model-path", "/m", "--tp-size", "4"]
    assert _check(run, stamp, requirements=[], inputs={"argv": changed_flag}, names=["demo-flashinfer-python"]) == (False, ["the inputs changed"])


def test_other_interpreter_is_other_inputs(tmp_path):
    link = tmp_path / "python"
    link.symlink_to(sys.executable)
    assert vs.inputs_digest({"a": 1}, str(link)) == vs.inputs_digest({"a": 1}, sys.executable)
    assert vs.inputs_digest({"a": 1}, "/usr/bin/false") != vs.inputs_digest({"a": 1}, sys.executable)
    assert vs.inputs_digest({"a": 1, "b": 2}) == vs.inputs_digest({"b": 2, "a": 1})


def test_files_stamp(tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_bytes(b"nvcc 13.0")
    files = {str(nvcc): vs.file_digest(str(nvcc))}
    stamp = vs.build_stamp(vs.inputs_digest({"arch": "120a"}), files=files)
    assert vs.evaluate(stamp, vs.inputs_digest({"arch": "120a"}), files=files) == (True, [])
    assert vs.evaluate(stamp, vs.inputs_digest({"arch": "100a"}), files=files) == (False, ["the inputs changed"])
    nvcc.write_bytes(b"nvcc 13.1")
    assert vs.evaluate(stamp, vs.inputs_digest({"arch": "120a"}), files={str(nvcc): vs.file_digest(str(nvcc))}) == (
        False, ["file changed: %s" % nvcc])
    nvcc.unlink()
    assert vs.evaluate(stamp, vs.inputs_digest({"arch": "120a"}), files={str(nvcc): vs.file_digest(str(nvcc))}) == (
        False, ["missing file: %s" % nvcc])


def test_write_and_load_stamp(tmp_path):
    path = str(tmp_path / "stamps" / "step.json")
    stamp = vs.build_stamp("ab" * 32, result={"version": "0.6.3"})
    assert vs.write_stamp(path, stamp) is True
    assert vs.write_stamp(path, stamp) is False
    assert vs.load_stamp(path) == stamp
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    pathlib.Path(path).write_text("{not json")
    assert vs.load_stamp(path) is None


def test_reader_failure_is_explained():
    with pytest.raises(RuntimeError, match="could not read its distributions"):
        vs.read_state(lambda argv: (1, "", "boom"), "/opt/v/bin/python", PINS)


LINKS = pathlib.Path(__file__).resolve().parents[3] / "roles" / "cuda_toolchain" / "files" / "cuda_dev_links.py"


def _module(tmp_path, site, args):
    return ansible_run.module_file("venv_stamp", args, tmp_path, pythonpath=[site])


def test_module_check_record_check(tmp_path, site):
    """The role sequence: a miss, the step, record (reports ok), then a converged rerun matches and returns the result."""
    args = {"path": str(tmp_path / "st" / "torch.json"), "python": sys.executable, "requirements": PINS, "inputs": INPUTS}
    first = _module(tmp_path, site, args)
    assert (first["changed"], first["matched"], first["reasons"]) == (False, False, ["no stamp"])
    assert first["distributions"]["demo-torch"] == "2.10.0.dev20251201+cu130"
    record = _module(tmp_path, site, dict(args, state="record", result={"home": "/x"}))
    assert (record["changed"], record["written"], record["matched"]) == (False, True, True)
    rerun = _module(tmp_path, site, args)
    assert (rerun["changed"], rerun["matched"], rerun["result"]) == (False, True, {"home": "/x"})
    changed_pin = _module(tmp_path, site, dict(args, requirements=["demo-torch==2.11.0"]))
    assert changed_pin["matched"] is False and changed_pin["result"] is None


def test_module_refuses_to_record_an_unsatisfied_venv(tmp_path, site):
    args = {"path": str(tmp_path / "torch.json"), "python": sys.executable, "requirements": ["demo-torch==9"], "state": "record"}
    result = _module(tmp_path, site, args)
    assert result["failed"] and "not satisfied: demo-torch==9" in result["msg"]
    assert not (tmp_path / "torch.json").exists()


def test_module_without_the_interpreter_is_a_miss(tmp_path, site):
    result = _module(tmp_path, site, {"path": str(tmp_path / "s.json"), "python": str(tmp_path / "no" / "python")})
    assert (result["matched"], result["reasons"]) == (False, ["no interpreter %s" % (tmp_path / "no" / "python")])


def _links(home, *extra):
    proc = subprocess.run([sys.executable, str(LINKS), str(home)] + list(extra), capture_output=True, text=True, check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_dev_links_created_once_and_restored(tmp_path):
    home = tmp_path / "cu13"
    (home / "lib").mkdir(parents=True)
    for name in ("libcudart.so.13", "libnvrtc.so.13", "libcudart.so.13.0.96", "README"):
        (home / "lib" / name).write_text("")
    rc, out = _links(home, "--check")
    assert rc == 0 and len(out["changed"]) == 3 and not (home / "lib64").exists()
    rc, out = _links(home)
    assert rc == 0 and sorted(os.path.basename(p) for p in out["changed"]) == ["lib64", "libcudart.so", "libnvrtc.so"]
    assert os.readlink(home / "lib" / "libcudart.so") == "libcudart.so.13" and os.readlink(home / "lib64") == "lib"
    assert _links(home) == (0, {"changed": [], "error": None})
    (home / "lib" / "libnvrtc.so").unlink()
    assert _links(home)[1]["changed"] == [str(home / "lib" / "libnvrtc.so")]
    (home / "lib" / "libnvrtc.so").unlink()
    (home / "lib" / "libnvrtc.so").write_text("a real file")
    rc, out = _links(home)
    assert rc == 1 and "is not a link" in out["error"]


def test_names_not_installed_are_no_miss_until_installed(run, site):
    names = ["demo-torch", "demo-torchvision"]
    stamp = _stamp(run, requirements=[], names=names)
    assert _check(run, stamp, requirements=[], names=names) == (True, [])
    _dist(site, "demo-torchvision", "0.25.0")
    assert _check(run, stamp, requirements=[], names=names) == (False, ["the installed distributions changed"])


def test_names_digest_a_partial_install_as_it_is(run, site):
    """SGLang installed with a selection of its dependencies (sglang_source): no miss, but a change of one is."""
    _dist(site, "demo-sglang", "0.5.9", requires=["demo-torch==2.9.1", "demo-not-selected", "demo-filelock"])
    stamp = _stamp(run, requirements=[], names=["demo-sglang"])
    assert _check(run, stamp, requirements=[], names=["demo-sglang"]) == (True, [])
    _dist(site, "demo-not-selected", "1.0")
    assert _check(run, stamp, requirements=[], names=["demo-sglang"]) == (False, ["the installed distributions changed"])
    stamp = _stamp(run, requirements=[], names=["demo-sglang"])
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    assert _check(run, stamp, requirements=[], names=["demo-sglang"]) == (False, ["the installed distributions changed"])


# digest="named" (the FlashInfer install stamp): FlashInfer's closure is checked strictly, but only the named
# distributions (its pins and the protected ones) are digested, so sglang_source moving a shared dependency within
# FlashInfer's specifiers is no miss on the first re-run.
FI_PINS = ["demo-flashinfer-python==0.6.3"]
FI_NAMES = ["demo-torch", "demo-torchvision"]
FI_INPUTS = {"packages": FI_PINS, "index": "https://flashinfer.ai/whl"}


def _fi_stamp(run):
    state = vs.read_state(run, sys.executable, FI_PINS, FI_NAMES)
    return vs.build_stamp(vs.inputs_digest(FI_INPUTS, sys.executable), state, digest="named")


def _fi_check(run, stamp, pins=None, inputs=None, digest="named"):
    state = vs.read_state(run, sys.executable, FI_PINS if pins is None else pins, FI_NAMES)
    return vs.evaluate(stamp, vs.inputs_digest(FI_INPUTS if inputs is None else inputs, sys.executable), state,
                       digest=digest)


def test_named_digest_ignores_a_dependency_moved_within_its_specifier(run, site):
    stamp = _fi_stamp(run)
    assert _fi_check(run, stamp) == (True, [])
    # what sglang_source does: upgrade a dependency FlashInfer shares (demo-torch requires demo-filelock>=3)
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    _dist(site, "demo-filelock", "3.21.0")
    assert _fi_check(run, stamp) == (True, [])
    # ... and unrelated installs
    _dist(site, "demo-unrelated", "9.9")
    assert _fi_check(run, stamp) == (True, [])
    # the whole-closure digest of the same stamp inputs would have missed on exactly that (the old behaviour)
    closure_stamp = vs.build_stamp(vs.inputs_digest(FI_INPUTS, sys.executable),
                                   vs.read_state(run, sys.executable, FI_PINS, FI_NAMES))
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    _dist(site, "demo-filelock", "3.22.0")
    assert _fi_check(run, closure_stamp, digest="closure") == (False, ["the installed distributions changed"])
    assert _fi_check(run, stamp) == (True, [])


def test_named_digest_still_misses_on_every_change_it_stands_for(run, site):
    stamp = _fi_stamp(run)
    # the inputs (the pins, the index)
    assert _fi_check(run, stamp, inputs=dict(FI_INPUTS, index="https://pypi.org/simple")) == (False, ["the inputs changed"])
    matched, reasons = _fi_check(run, stamp, pins=["demo-flashinfer-python==0.6.4"],
                                 inputs=dict(FI_INPUTS, packages=["demo-flashinfer-python==0.6.4"]))
    assert not matched and "the inputs changed" in reasons
    assert "not satisfied: demo-flashinfer-python==0.6.4 (installed 0.6.3)" in reasons
    # a dependency of the closure removed, or moved out of its specifier: strict check, whatever the digest
    info = next(site.glob("demo_filelock-*.dist-info"))
    _remove(info)
    assert _fi_check(run, stamp) == (False, ["not installed: demo-filelock>=3"])
    _dist(site, "demo-filelock", "2.0")
    assert _fi_check(run, stamp) == (False, ["not satisfied: demo-filelock>=3 (installed 2.0)"])
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    _dist(site, "demo-filelock", "3.20.0")
    assert _fi_check(run, stamp) == (True, [])


def test_named_digest_misses_on_a_changed_pinned_or_protected_distribution(run, site):
    stamp = _fi_stamp(run)
    # FlashInfer reinstalled (other files)
    record = next(site.glob("demo_flashinfer_python-*.dist-info")) / "RECORD"
    text = record.read_text()
    record.write_text(text + "demo-flashinfer-python/extra.so,sha256=x,1\n")
    assert _fi_check(run, stamp) == (False, ["the installed distributions changed"])
    record.write_text(text)
    assert _fi_check(run, stamp) == (True, [])
    # torch (protected, named) replaced by another build
    _remove(next(site.glob("demo_torch-*.dist-info")))
    _dist(site, "demo-torch", "2.10.0.dev20251202+cu130", requires=["demo-filelock>=3"])
    assert _fi_check(run, stamp) == (False, ["the installed distributions changed"])
    # a protected distribution that was absent is installed (torchvision)
    stamp = _fi_stamp(run)
    _dist(site, "demo-torchvision", "0.25.0")
    assert _fi_check(run, stamp) == (False, ["the installed distributions changed"])


def test_unknown_digest_is_refused():
    with pytest.raises(ValueError, match="digest must be one of closure, named"):
        vs.closure_digest({}, "everything")


def test_module_records_and_checks_a_named_digest(tmp_path, site):
    args = {"path": str(tmp_path / "fi.json"), "python": sys.executable, "requirements": FI_PINS, "names": FI_NAMES,
            "inputs": FI_INPUTS, "digest": "named"}
    assert _module(tmp_path, site, dict(args, state="record"))["written"] is True
    _remove(next(site.glob("demo_filelock-*.dist-info")))
    _dist(site, "demo-filelock", "3.21.0")
    assert _module(tmp_path, site, args)["matched"] is True
    assert _module(tmp_path, site, dict(args, digest="closure"))["matched"] is False


@pytest.mark.parametrize("name", ["Flashinfer_Python", "zope.interface", "A-_.b", "  torch ", "sgl__kernel", "NVIDIA-cuBLAS-cu13"])
def test_one_name_rule_with_and_without_packaging(name):
    """The fallback of _venv_metadata.canonicalize_name is packaging's rule exactly (PEP 503)."""
    from packaging.utils import canonicalize_name as packaging_rule  # pylint: disable=import-outside-toplevel

    from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_metadata as vm  # pylint: disable=import-outside-toplevel
    assert vm.canonicalize_name(name) == str(packaging_rule(name.strip()))
    assert vm.SEPARATORS_RE.sub("-", name.strip()).lower() == str(packaging_rule(name.strip()))
    # the reader's names and the stamps' names are the same rule
    assert vs.normalize(name) == vm.canonicalize_name(name)
