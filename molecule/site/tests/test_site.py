"""site.yml on the sandbox, end to end: release layout, venv, torch untouched by the SGLang install, nvcc for
sm_120a, the kernel wheel, the FA3 fallback, the unit, the service enabled (not started: no GPU), the manifest."""

import json
import re

import pytest

ROOT = "/opt/sglang"
CURRENT = ROOT + "/current"
VENV = CURRENT + "/venv"
PY = VENV + "/bin/python"
UNIT = "/etc/systemd/system/sglang.service"
CUDA_ENV = "/etc/blackwell-sglang/cuda.env"
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
    assert host.file(release + "/venv/bin/python").exists
    assert host.file(release + "/src/sglang/.git").is_directory


def test_torch_unchanged_after_the_sglang_install(host, release):
    assert _py(host, "import torch; print(torch.__version__)") == "2.13.0+cpu"
    state = release + "/venv/blackwell-sglang/sglang_source"
    assert json.loads(host.file(state + "/stamp.json").content_string)["torch"] == "2.13.0+cpu"
    assert "torch==2.13.0+cpu" in host.file(state + "/constraints.txt").content_string.splitlines()


def test_sglang_from_the_mirror_commit(host, host_vars, release, manifest, mirror_commit):
    # the real python/ tree of the original pin; its version is the pin's setuptools-scm fallback + the upstream id
    version = host_vars["sglang_source_pretend_version"]
    assert version.endswith("+gd28f35240a")
    assert _py(host, "import sglang; print(sglang.__version__)") == version
    assert manifest["sglang"]["commit"] == mirror_commit
    assert manifest["sglang"]["version"] == version
    assert "d28f35240a28de1e09967975e258b3dd7e74924f" in host.check_output(
        "git -C %s/src/sglang log -1 --format=%%B", release)


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


def test_kernel_wheel_installed_from_the_recorded_wheel(host, manifest):
    wheels = manifest["wheels"]
    assert len(wheels) == 1
    path, sha256 = next(iter(wheels.items()))
    assert sha256 and re.fullmatch(r"[0-9a-f]{64}", sha256)
    assert host.check_output("sha256sum %s", path).split()[0] == sha256
    url = _py(host, "import json, importlib.metadata as m; "
                    "print(json.loads(m.distribution('sgl-kernel').read_text('direct_url.json'))['url'])")
    assert url == "file://" + path
    assert manifest["packages"]["sgl-kernel"] == "0.3.21"


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


def test_service_enabled_not_started_without_gpu(host):
    svc = host.service("sglang")
    assert svc.is_enabled
    assert not svc.is_running


def test_no_previous_release_after_a_first_converge(host):
    # Only one converge's inputs: nothing was switched away from.
    assert not host.file(ROOT + "/previous").exists
