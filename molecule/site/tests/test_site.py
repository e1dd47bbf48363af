"""site.yml on the sandbox with the `current` stack (host_vars/bw-site-1.yml), end to end: release layout, venv, torch
untouched by the SGLang install, the current tree's SGLang (d55f1c28e2) in the manifest, nvcc for sm_120a, the kernel
wheel built from the current tree's kernel location (python/sglang/kernels/aot/), the FA3 fallback, the unit and its
flags checked again against the installed parser, the service enabled (not started: no GPU), the manifest."""

import json
import re
import shlex

import pytest

ROOT = "/opt/sglang"
CURRENT = ROOT + "/current"
VENV = CURRENT + "/venv"
PY = VENV + "/bin/python"
UNIT = "/etc/systemd/system/sglang.service"
CUDA_ENV = "/etc/blackwell-sglang/cuda.env"
# the current stack's SGLang (roles/sglang_stack `current`) and where that tree keeps its kernel
UPSTREAM = "d55f1c28e223226575d40d4449266630eaf2a277"
KERNEL_TREE = "python/sglang/kernels/aot"
KERNEL = r"""
#include <cstdio>
#include <cuda_fp4.h>
__global__ void q(const float* x, __nv_fp4_e2m1* y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH_SPECIFIC__ != 1200
#error "not sm_120a"
#endif
  y[threadIdx.x] = __nv_fp4_e2m1(x[threadIdx.x]);
}
int main() { std::puts("built"); return 0; }
"""


def _quote(code):
    return "'" + code.replace("'", "'\"'\"'") + "'"


def _py(host, code):
    return host.check_output("%s -c %s" % (PY, _quote(code))).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def release(host):
    link = host.file(CURRENT)
    assert link.is_symlink
    target = link.linked_to
    assert re.fullmatch(ROOT + r"/releases/[0-9a-f]{12}", target), target
    return target


@pytest.fixture(scope="module")
def manifest(host, release):
    return json.loads(host.file(release + "/manifest.json").content_string)


@pytest.fixture(scope="module")
def mirror_commit(host, host_vars):
    return host.check_output("git --git-dir %s rev-parse %s^{commit}",
                             host_vars.get("sandbox_sglang_mirror", "/srv/mirror/sglang.git"),
                             host_vars.get("sandbox_sglang_mirror_ref", "original-20260307-fixture-kernel"))


def test_release_is_live_and_keyed(host, release):
    key = json.loads(host.file(release + "/release-key.json").content_string)
    assert key["id"] == release.rsplit("/", 1)[1]
    assert key["key"]["torch_version"] == "2.13.0+cpu"
    assert key["key"]["sglang_ref"] == "current-20260818-fixture-kernel"
    assert host.file(release + "/venv/bin/python").exists
    assert host.file(release + "/src/sglang/.git").is_directory


def test_torch_unchanged_after_the_sglang_install(host, release):
    assert _py(host, "import torch; print(torch.__version__)") == "2.13.0+cpu"
    state = release + "/venv/blackwell-sglang/sglang_source"
    assert json.loads(host.file(state + "/stamp.json").content_string)["torch"] == "2.13.0+cpu"
    assert "torch==2.13.0+cpu" in host.file(state + "/constraints.txt").content_string.splitlines()


def test_sglang_is_the_current_tree_from_the_mirror_commit(host, host_vars, release, manifest, mirror_commit):
    # the real python/ tree of the current pin; its version is the pin's setuptools-scm fallback + the upstream id.
    # `import sglang` needs torchvision at this pin (none in the sandbox): the distribution's metadata says it here,
    # the parser check below imports it
    version = host_vars["sglang_source_pretend_version"]
    assert version == "0.0.0.dev0+g" + UPSTREAM[:10]
    assert host_vars["sandbox_sglang_mirror_ref"] == "current-20260818-fixture-kernel"
    assert _py(host, "import importlib.metadata as m; print(m.version('sglang'))") == version
    url = _py(host, "import json, importlib.metadata as m; "
                    "print(json.loads(m.distribution('sglang').read_text('direct_url.json'))['url'])")
    assert url == "file://%s/src/sglang/python" % release
    assert manifest["sglang"]["commit"] == mirror_commit
    assert manifest["sglang"]["version"] == version
    assert UPSTREAM in host.check_output("git -C %s/src/sglang log -1 --format=%%B", release)
    # the current tree's layout: the kernel inside python/, no sgl-kernel/ at the top
    assert host.file("%s/src/sglang/%s/CMakeLists.txt" % (release, KERNEL_TREE)).exists
    assert not host.file(release + "/src/sglang/sgl-kernel").exists


def test_nvcc_compiles_for_sm_120a(host):
    env = {}
    for line in host.file(CUDA_ENV).content_string.splitlines():
        if line and not line.startswith("#"):
            key, _sep, value = line.partition("=")
            env[key] = value
    envs = " ".join("%s=%s" % (k, v) for k, v in env.items())
    host.run_expect([0], "rm -rf /tmp/site-sm120a && mkdir /tmp/site-sm120a")
    host.check_output("cat > /tmp/site-sm120a/k.cu <<'EOF'\n%s\nEOF" % KERNEL)
    build = host.run("env -i %s nvcc -gencode arch=compute_120a,code=sm_120a -o /tmp/site-sm120a/k "
                     "/tmp/site-sm120a/k.cu" % envs)
    assert build.rc == 0, build.stderr
    assert host.check_output("/tmp/site-sm120a/k") == "built"
    host.run("rm -rf /tmp/site-sm120a")


def test_kernel_wheel_built_from_the_current_kernel_tree(host, release, manifest):
    wheels = manifest["wheels"]
    assert len(wheels) == 1
    path, sha256 = next(iter(wheels.items()))
    assert sha256 and re.fullmatch(r"[0-9a-f]{64}", sha256)
    assert host.check_output("sha256sum %s", path).split()[0] == sha256
    # the distribution the current tree pins (the fixture carries its name and version), not the old sgl-kernel
    assert re.fullmatch(r"sglang_kernel-0\.4\.6\.post1-.*\.whl", path.rsplit("/", 1)[1]), path
    url = _py(host, "import json, importlib.metadata as m; "
                    "print(json.loads(m.distribution('sglang-kernel').read_text('direct_url.json'))['url'])")
    assert url == "file://" + path
    assert manifest["packages"]["sglang-kernel"] == "0.4.6.post1"
    assert "sgl-kernel" not in manifest["packages"]
    key = manifest["kernel"]["build_key"]
    assert key and path.split("/")[-2] == key
    # from python/sglang/kernels/aot/ of this release's checkout: the SM120 patches changed that tree and nothing else
    # (the key is the patched tree's), and the installed package's files are that tree's, patched. The wheel may come
    # from the controller's artifact cache (built by an earlier run for the same key), so no build log is asked for.
    changed = host.check_output("git -C %s/src/sglang status --porcelain --untracked-files=no", release).splitlines()
    assert changed and all(line[3:].startswith(KERNEL_TREE + "/") for line in changed), changed
    tree = "%s/src/sglang/%s/python/sgl_kernel" % (release, KERNEL_TREE)
    installed = _py(host, "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('sgl_kernel').origin))")
    for name in ("__init__.py", "flash_attn.py"):
        assert host.file("%s/%s" % (installed, name)).sha256sum == host.file("%s/%s" % (tree, name)).sha256sum, name
    assert '__version__ = "0.4.6.post1"' in host.file(tree + "/__init__.py").content_string


def test_kernel_imports_with_the_fa3_fallback(host):
    out = json.loads(_py(host, (
        "import json, sgl_kernel\n"
        "from sgl_kernel import flash_attn\n"
        "print(json.dumps({'fa3': flash_attn.FA3_AVAILABLE, 'supported': flash_attn.is_fa3_supported()}))")))
    assert out == {"fa3": False, "supported": False}


def test_unit_runs_the_live_release(host, manifest):
    unit = host.file(UNIT)
    text = unit.content_string
    assert PY + " /etc/blackwell-sglang/sglang-launch.py" in text   # the launcher runs sglang.launch_server
    assert "EnvironmentFile=" + CUDA_ENV in text
    assert "--kv-cache-dtype" in text
    assert manifest["unit"]["path"] == UNIT
    assert host.check_output("sha256sum %s", UNIT).split()[0] == manifest["unit"]["sha256"]
    # single node: nothing to mask, so the fleet hash is the file's own hash
    assert manifest["unit"]["fleet_sha256"] == manifest["unit"]["sha256"]


def _unit_argv(text):
    """The server's arguments of the unit's ExecStart (the lines after `--`)."""
    lines = text.split("ExecStart=", 1)[1].splitlines()
    assert lines[0].rstrip().endswith("-- \\"), lines[0]
    argv = []
    for line in lines[1:]:
        argv += shlex.split(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            return argv
    raise AssertionError("ExecStart does not end")


def test_unit_flags_pass_the_current_parser_again(host, ansible_host, host_vars):
    argv = _unit_argv(host.file(UNIT).content_string)
    flags = dict(zip(argv, argv[1:]))
    # the current preset's service flags, as the inventory passes them
    assert flags["--kv-cache-dtype"] == "bf16"
    assert flags["--fp4-gemm-backend"] == "flashinfer_cutlass"
    assert flags["--moe-runner-backend"] == "flashinfer_cutlass"
    out = ansible_host.ansible("blackwell.sglang.sglang_server_args", json.dumps({
        "python": PY, "args": argv, "compute_capability": "12.0",
        "stub_modules": host_vars["sglang_service_parser_stub_modules"]}), check=False)
    assert not out.get("failed"), out.get("msg")
    assert out["validation"] == "parser" and out["method"] == "ServerArgs.add_cli_args"
    assert out["version"] == host_vars["sglang_source_pretend_version"]
    assert out["stubbed_modules"] == ["torchvision"]
    assert "--moe-runner-backend" in out["flags"] and "flashinfer_cutlass" in out["flags"]["--fp4-gemm-backend"]["choices"]


def test_service_enabled_not_started_without_gpu(host):
    svc = host.service("sglang")
    assert svc.is_enabled
    assert not svc.is_running


def test_the_release_is_sealed_with_the_stages_facts_and_no_secret(host, release, manifest, host_vars):
    """The seal written by the side effect's repair run (docs/release.md "The release seal"): this release, every
    distribution of its venv, the toolchain's and the probe's files, the build stages' facts; values of the settings
    never reach the file (the API key is not even a build setting, and must not appear either)."""
    f = host.file(release + "/seal.json")
    assert f.exists and f.user == "root" and f.mode == 0o644
    seal = json.loads(f.content_string)
    assert seal["kind"] == "blackwell.sglang/release-seal" and seal["release"] == release.rsplit("/", 1)[1]
    assert seal["distributions"]["flashinfer-python"]["version"] == manifest["packages"]["flashinfer-python"]
    assert set(seal["distributions"]) == set(manifest["packages"])
    stages = {item["stage"] for item in seal["files"].values()}
    assert {"toolchain", "probe", "release"} <= stages, seal["files"]
    assert seal["facts"]["sglang_stack_sglang_commit"] == manifest["sglang"]["commit"]
    assert all(re.fullmatch("[0-9a-f]{64}", digest) for digest in seal["inputs"].values())
    assert "sglang_stack_preset" in seal["inputs"]
    assert host_vars.get("sglang_service_api_key", "sandbox-api-key") not in f.content_string


def test_no_previous_release_after_a_first_converge(host):
    # Only one converge's inputs: nothing was switched away from.
    assert not host.file(ROOT + "/previous").exists
