"""What cuda_toolchain promises on the sandbox (pip method): a CUDA 13.0 toolkit whose nvcc compiles for sm_120a,
exported to services (env file) and login shells (profile.d)."""

import json

import pytest

ENV_FILE = "/etc/blackwell-sglang/cuda.env"
PROFILE = "/etc/profile.d/blackwell-sglang-cuda.sh"
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


@pytest.fixture(scope="module")
def facts(host):
    return json.loads(host.file("/root/cuda_toolchain_facts.json").content_string)


@pytest.fixture(scope="module")
def env(host):
    pairs = {}
    for line in host.file(ENV_FILE).content_string.splitlines():
        if line and not line.startswith("#"):
            key, _sep, value = line.partition("=")
            pairs[key] = value
    return pairs


def test_env_file_exports_the_toolkit(host, env, facts):
    home = facts["home"]
    assert host.file(ENV_FILE).mode == 0o644
    assert env["CUDA_HOME"] == home
    assert env["CUDA_PATH"] == home
    assert env["CUDACXX"] == home + "/bin/nvcc"
    assert env["PATH"].split(":")[0] == home + "/bin"
    assert env["LD_LIBRARY_PATH"] == home + "/lib64"


def test_pip_wheels_share_one_minor(host):
    pip = "/opt/blackwell-sglang/cuda-13.0/bin/pip"
    out = host.check_output(pip + " list --format=json")
    versions = {d["name"].lower(): d["version"] for d in json.loads(out)}
    for name in ("nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-cuda-cccl", "nvidia-cuda-crt", "nvidia-nvvm"):
        assert versions[name].startswith("13.0."), (name, versions.get(name))


def test_wheel_tree_is_a_usable_cuda_home(host, facts):
    home = facts["home"]
    assert host.file(home + "/lib64").is_symlink
    assert host.file(home + "/lib64").linked_to == home + "/lib"
    assert host.file(home + "/lib/libcudart.so").linked_to == home + "/lib/libcudart.so.13"
    assert host.file(home + "/nvvm/bin/cicc").is_file
    assert host.file(home + "/include/cccl/cuda/std/utility").is_file


def test_login_shell_sees_nvcc_13_0(host, facts):
    out = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc; nvcc --version'")
    lines = out.splitlines()
    assert lines[0] == facts["home"]
    assert lines[1] == facts["home"] + "/bin/nvcc"
    assert "release 13.0, V" + facts["nvcc_version"] in out


def test_nvcc_compiles_for_sm_120a_with_the_service_environment(host, env):
    host.run_expect([0], "rm -rf /tmp/verify-sm120a && mkdir /tmp/verify-sm120a")
    host.check_output("cat > /tmp/verify-sm120a/k.cu <<'EOF'\n%s\nEOF" % KERNEL)
    envs = " ".join("%s=%s" % (k, v) for k, v in env.items())
    build = host.run("env -i %s nvcc -gencode arch=compute_120a,code=sm_120a -o /tmp/verify-sm120a/k "
                     "/tmp/verify-sm120a/k.cu" % envs)
    assert build.rc == 0, build.stderr
    assert host.check_output("/tmp/verify-sm120a/k") == "built"
    # the guard is real: a plain sm_120 target must be refused by the #error
    plain = host.run("env -i %s nvcc -gencode arch=compute_120,code=sm_120 -c -o /tmp/verify-sm120a/p.o "
                     "/tmp/verify-sm120a/k.cu" % envs)
    assert plain.rc != 0 and "not sm_120a" in plain.stderr
    host.run("rm -rf /tmp/verify-sm120a")


def test_nvcc_lists_sm120_targets(host, env):
    out = host.check_output(env["CUDACXX"] + " --list-gpu-arch")
    assert "compute_120" in out.split()


def test_existing_method_exports_the_same_home(host, facts):
    content = host.file("/etc/blackwell-sglang/cuda-existing.env").content_string
    assert "(existing method)" in content
    assert "CUDA_HOME=%s\n" % facts["home"] in content
