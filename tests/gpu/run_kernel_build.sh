#!/usr/bin/env bash
# On the GPU machine (device tool): build the real 0307 sgl-kernel wheel for sm_120a through the collection's role,
# then check its cubins and compile SGLang's NVFP4 JIT kernels for sm_120a in the service's environment.
#   run_kernel_build.sh start   -> sets up and starts the build in the background (setsid), returns at once
#   run_kernel_build.sh wait N  -> prints progress for up to N seconds; exit 0 when finished, 3 while running
#   run_kernel_build.sh finish  -> cuobjdump, import check, NVFP4 JIT compile; copies the evidence into $OUT
#   run_kernel_build.sh jit     -> only the NVFP4 JIT compile for sm_120a (needs no kernel build)
# Carried with the call: .whl (ansible-core, tvm-ffi, flashinfer-python), .gpu-src (bundle tarballs, libnuma debs).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=/tmp/bw-gpu
log=$W/run.log
mkdir -p "$W"
export PYTHONPATH=$W/site ANSIBLE_CONFIG=$repo/ansible.cfg ANSIBLE_LOCAL_TEMP=$W/ansible-tmp ANSIBLE_NOCOLOR=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$W/site/bin:$PATH

start() {
  rm -rf "$W"; mkdir -p "$W/site" "$W/cache" "$W/numa" "$W/src"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$repo"/.whl/*.whl || exit 1
  for d in "$repo"/.gpu-src/*.deb; do dpkg -x "$d" "$W/numa"; done
  ls -la "$W"/numa/usr/lib/x86_64-linux-gnu/*numa*
  # the source cache: the bundle's tarballs + placeholders for the two trees the bundle lacks (docs/sgl-kernel.md)
  ln -s "$repo"/.gpu-src/*.tar.gz "$repo"/.gpu-src/manifest.json "$W/cache/"
  mkdir -p "$W/cache/repo-triton" "$W/cache/repo-flash-attention"
  for p in repo-triton repo-flash-attention; do echo "placeholder: not in the upstream bundle" >"$W/cache/$p/.blackwell-placeholder"; done
  # the install step copies triton's python/triton_kernels/triton_kernels/ into the wheel: an empty directory then
  mkdir -p "$W/cache/repo-triton/python/triton_kernels/triton_kernels"
  for f in csrc/flash_attn/src/flash_fwd_sparse_hdim128_bf16_causal_sm80.cu csrc/flash_attn/src/flash_fwd_sparse_hdim128_bf16_sm80.cu \
           csrc/flash_attn/src/flash_fwd_sparse_hdim128_fp16_causal_sm80.cu csrc/flash_attn/src/flash_fwd_sparse_hdim128_fp16_sm80.cu \
           csrc/flash_attn/flash_sparse_api.cpp hopper/flash_prepare_scheduler.cu hopper/flash_api.cpp hopper/flash_fwd_combine.cu; do
    mkdir -p "$(dirname "$W/cache/repo-flash-attention/$f")"; : >"$W/cache/repo-flash-attention/$f"
  done
  tar xzf "$repo/.gpu-src/sglang-2026-03-07-d28f35240a.tar.gz" -C "$W/src"
  # the release venv: the machine's own venv with torch 2.11+cu130 (the stand-in for the stack's torch nightly,
  # as torch_nightly would leave it); scikit-build-core, ninja and wheel are already in it (no index here)
  ln -s "$(python3 -c 'import sys; print(sys.prefix)')" "$W/venv"
  python3 -c 'import sys; print("== release venv:", sys.prefix)'
  # that venv has `python -m pip` but no bin/pip script (the role calls <venv>/bin/pip, as a venv made by torch_nightly has)
  [[ -x $W/venv/bin/pip ]] || printf '#!/bin/sh\nexec %s -m pip "$@"\n' "$W/venv/bin/python3" >"$W/venv/bin/pip" && chmod +x "$W/venv/bin/pip"
  cat >"$W/vars.json" <<JSON
{"sgl_kernel_sm120_source_dir": "$W/src/sglang", "sgl_kernel_sm120_venv": "$W/venv",
 "sgl_kernel_sm120_cuda_home": "/usr/local/cuda", "sgl_kernel_sm120_cccl_include_dir": "/usr/local/cuda/include/cccl",
 "sgl_kernel_sm120_release_root": "$W/opt", "sgl_kernel_sm120_log_dir": "$W/log",
 "sgl_kernel_sm120_patches": ["cmake_policy_guards", "cccl_include", "fa3_soft_fallback", "skip_fa3_build", "sm120_only"],
 "sgl_kernel_sm120_target_archs": ["sm_120a"], "sgl_kernel_sm120_system_packages": [],
 "sgl_kernel_sm120_cmake_requirement": "",
 "sgl_kernel_sm120_extra_cmake_args": ["-DNUMA_INCLUDE_DIR=$W/numa/usr/include", "-DNUMA_LIB_DIR=$W/numa/usr/lib/x86_64-linux-gnu"],
 "sgl_kernel_sm120_source_cache": "$W/cache",
 "sgl_kernel_sm120_source_placeholders_allowed": ["repo-triton", "repo-flash-attention"],
 "sgl_kernel_sm120_pip_extra_args": "--no-index", "sgl_kernel_sm120_progress_interval": 30,
 "sgl_kernel_sm120_keep_build_dir": true, "ansible_python_interpreter": "$(command -v python3)", "gpu_out": "$W"}
JSON
  cd "$repo" || exit 1
  echo "== $(date -u +%T) starting ansible-playbook (log $log)"
  LD_LIBRARY_PATH=$W/numa/usr/lib/x86_64-linux-gnu setsid nohup python3 "$W/site/bin/ansible-playbook" -i localhost, -c local \
    tests/gpu/kernel_build.yml -e "@$W/vars.json" >"$log" 2>&1 < /dev/null &
  echo $! >"$W/pid"
  sleep 5; tail -5 "$log"
}

wait_for() {
  local limit=$1 t0=$SECONDS
  while kill -0 "$(cat "$W/pid")" 2>/dev/null; do
    ((SECONDS - t0 >= limit)) && { echo "== $(date -u +%T) still running"; tail -3 "$log"; \
      grep -hoE '\[[0-9]+/[0-9]+\][^\n]{0,80}' "$W"/log/sgl-kernel-build-*.log 2>/dev/null | tail -1; return 3; }
    sleep 20
    grep -hoE '^\[[0-9]+/[0-9]+\]' "$W"/log/sgl-kernel-build-*.log 2>/dev/null | tail -1
  done
  echo "== $(date -u +%T) ansible-playbook finished"; tail -40 "$log"
  grep -q 'failed=0' "$log"
}

finish() {
  local out=${OUT:-$W/out}; mkdir -p "$out"
  cp "$log" "$out/ansible-playbook.log"
  cp "$W"/log/sgl-kernel-build-*.log "$out/sgl-kernel-build.log" 2>/dev/null
  cp "$W"/log/sgl-kernel-configure-*.log "$out/sgl-kernel-configure.log" 2>/dev/null
  cp "$W/kernel-build-result.json" "$out/" 2>/dev/null
  # every cubin in the installed extensions must be sm_120a
  export LD_LIBRARY_PATH=$W/numa/usr/lib/x86_64-linux-gnu
  site=$("$W/venv/bin/python" -c 'import sgl_kernel, os; print(os.path.dirname(os.path.dirname(sgl_kernel.__file__)))')
  { for so in $(find "$site/sgl_kernel" "$site/deep_gemm" -name '*.so' 2>/dev/null | sort); do
      echo "## ${so#"$site"/}"; cuobjdump --list-elf "$so" 2>&1 | sed -E 's/^/   /'; done; } >"$out/cuobjdump-list-elf.txt"
  echo "== cubins by arch:"; grep -oE 'sm_[0-9]+[a-z]?' "$out/cuobjdump-list-elf.txt" | sort | uniq -c
  # the role's own probe (roles/sgl_kernel_sm120/files/sgl_kernel_probe.py): import + FA3 fallback
  "$W/venv/bin/python" "$repo/roles/sgl_kernel_sm120/files/sgl_kernel_probe.py" 2>&1 | tee "$out/sgl-kernel-probe.json"
  "$W/venv/bin/python" -c 'import sgl_kernel, sgl_kernel.flash_attn as fa, sgl_kernel.flash_mla as fm; print("fa3 supported:", fa.is_fa3_supported(), "flashmla import error:", fm._flashmla_import_error)' 2>&1 | tee -a "$out/sgl-kernel-probe.json"
  # NVFP4 JIT kernels (sgl_kernel.cutlass_scaled_fp4_mm / scaled_fp4_quant call them at this pin) for sm_120a, in
  # the service's environment (roles/sglang_service/templates/sglang.env.j2), as an unprivileged user
  id sglang >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin sglang
  state=$W/state cache=$W/cache-svc; mkdir -p "$state" "$cache"; chown sglang "$state" "$cache"
  chmod -R a+rX "$W/site" "$W/src"; chmod a+x "$W"
  runuser -u sglang -- env -i HOME="$state" XDG_CACHE_HOME="$cache" TVM_FFI_CACHE_DIR="$cache/tvm-ffi" \
    FLASHINFER_WORKSPACE_BASE="$cache" TRITON_CACHE_DIR="$cache/triton" CUDA_HOME=/usr/local/cuda \
    PATH="$W/venv/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    PYTHONPATH="$W/site" NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
    timeout 330 "$W/venv/bin/python" "$repo/tests/gpu/nvfp4_jit_compile.py" "$W/src/sglang/python" "$out/nvfp4-jit.json" 2>&1 | tee "$out/nvfp4-jit.log"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$out/gpu.txt"
}

jit() {  # NVFP4 JIT kernels only (no kernel build needed): SGLang's tree, tvm-ffi + flashinfer (CUTLASS headers) carried
  local out=${OUT:-$W/out}; mkdir -p "$out" "$W/site" "$W/src"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$repo"/.whl/apache_tvm_ffi-*.whl \
    "$repo"/.whl/flashinfer_python-*.whl || exit 1
  [[ -d $W/src/sglang ]] || tar xzf "$repo/.gpu-src/sglang-2026-03-07-d28f35240a.tar.gz" -C "$W/src"
  id sglang >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin sglang
  local state=$W/state cache=$W/cache-svc; mkdir -p "$state" "$cache" "$W/jit-out"; chown sglang "$state" "$cache" "$W/jit-out"
  chmod -R a+rX "$W/site" "$W/src"; chmod a+x "$W"
  local py; py=$(python3 -c 'import sys; print(sys.executable)')
  # the service's environment (roles/sglang_service/templates/sglang.env.j2 + the CUDA env file), as the unit user
  runuser -u sglang -- env -i HOME="$state" XDG_CACHE_HOME="$cache" TVM_FFI_CACHE_DIR="$cache/tvm-ffi" \
    FLASHINFER_WORKSPACE_BASE="$cache" TRITON_CACHE_DIR="$cache/triton" CUDA_HOME=/usr/local/cuda \
    CUDACXX=/usr/local/cuda/bin/nvcc PATH="$(dirname "$py"):/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    PYTHONPATH="$W/site" NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    timeout "${JIT_TIMEOUT:-420}" "$py" "$repo/tests/gpu/nvfp4_jit_compile.py" "$W/src/sglang/python" "$W/jit-out/nvfp4-jit.json" \
    2>&1 | tee "$out/nvfp4-jit.log"
  cp "$W/jit-out/nvfp4-jit.json" "$out/" 2>/dev/null  # the unit user cannot write to $OUT
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$out/gpu.txt"
}

case ${1:-} in
  jit) jit ;;
  start) start ;;
  wait) wait_for "${2:-540}" ;;
  finish) finish ;;
  *) echo "usage: $0 start|wait N|finish" >&2; exit 2 ;;
esac
