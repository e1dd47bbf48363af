#!/usr/bin/env bash
# On the GPU machine (device tool): build the real sgl-kernel wheels of the stack pins through the collection's role,
# then check every library of each wheel (symbols, cubins) and load it the way Python does.
#   run_kernel_build.sh start PIN      copies the inputs to /tmp, starts the build of that pin in the background
#                                      (setsid; PIN = original | current), returns at once
#   run_kernel_build.sh wait N         progress for up to N seconds; exit 0 when every build finished, 3 while running
#   run_kernel_build.sh finish PIN...  re-runs the role (wheel from its cache: install + the role's checks), then
#                                      unpacks the wheel: cuobjdump of every library, nm of undefined symbols, a real
#                                      load with no GPU visible; the evidence goes to $OUT/evidence-PIN.tar.gz
#   run_kernel_build.sh build PIN N    start, wait up to N seconds, then keep and check what the role built (below)
#                                      without a second role run: for a machine that may go back between two calls
#   run_kernel_build.sh evidence PIN WHEEL  the checks of finish on a wheel an earlier call brought back (a fresh
#                                      machine: a venv over the machine's torch, the wheel installed without deps)
#   run_kernel_build.sh jit PIN        only SGLang's NVFP4 JIT kernels of that pin, for the target archs
#   run_kernel_build.sh fijit          FlashInfer's NVFP4 JIT kernels (the current pin's NVFP4 path), for the target
#                                      archs; carried in .whl: flashinfer-python, tvm-ffi and flashinfer's imports
# Carried with the call: .whl (ansible-core and its missing dependencies; tvm-ffi and flashinfer-python for jit),
# .gpu-src (the upstream bundle's tarballs and manifest.json, Debian's libnuma1/libnuma-dev debs).
# Each step fails when its evidence is missing. The machine may go back between two calls, and a build with it: `build`
# writes into $OUT as it goes (the wheel, the role's result and logs first, then each check), so a call cut by its time
# limit still brings back the wheel, and `evidence` finishes from it.
set -uo pipefail
src_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=/tmp/bw-gpu
R=$B/repo            # a copy of the working tree: the device tool replaces the tree at the next call
export PYTHONPATH=$B/site ANSIBLE_CONFIG=$R/ansible.cfg ANSIBLE_LOCAL_TEMP=$B/ansible-tmp ANSIBLE_NOCOLOR=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$B/site/bin:$PATH
NUMA=$B/numa/usr/lib/x86_64-linux-gnu
TARGETS=${TARGETS:-sm_120a}

tarball() {  # the SGLang tree of a pin
  case $1 in
    original) echo sglang-2026-03-07-d28f35240a.tar.gz ;;
    current) echo sglang-2026-08-18-d55f1c28e2.tar.gz ;;
    *) echo "unknown pin $1 (original | current)" >&2; return 1 ;;
  esac
}

setup_common() {
  rm -rf "$B"; mkdir -p "$B/site" "$B/numa" "$B/cache"
  cp -a "$src_repo" "$R" || exit 1
  rm -rf "$R/.whl" "$R/.gpu-src"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$B/site" \
    "$src_repo"/.whl/ansible_core-*.whl "$src_repo"/.whl/resolvelib-*.whl "$src_repo"/.whl/cryptography-*.whl \
    "$src_repo"/.whl/cffi-*.whl "$src_repo"/.whl/pycparser-*.whl || exit 1
  for d in "$src_repo"/.gpu-src/*.deb; do dpkg -x "$d" "$B/numa"; done
  ls "$NUMA"/libnuma.so* >/dev/null || { echo "libnuma missing from .gpu-src" >&2; exit 1; }
  # the source cache: the bundle's tarballs + placeholders for the two trees the bundle lacks (docs/sgl-kernel.md):
  # empty trees but for the directory triton's install step copies; drop_sparse_attn takes sgl-attn's sparse
  # sources out of the build and skip_fa3_build its FA3 sources, so the sgl-attn placeholder holds no file at all
  cp "$src_repo"/.gpu-src/*.tar.gz "$src_repo"/.gpu-src/manifest.json "$B/cache/"
  mkdir -p "$B/cache/repo-triton/python/triton_kernels/triton_kernels" "$B/cache/repo-flash-attention"
  for p in repo-triton repo-flash-attention; do echo "placeholder: not in the upstream bundle" >"$B/cache/$p/.blackwell-placeholder"; done
}

release_venv() {  # a venv over the machine's torch: its distributions linked in, pip's own and the kernels' excepted
  python3 -m venv "$1" || return 1
  local msite vsite; msite=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  vsite=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for e in "$msite"/*; do case ${e##*/} in pip|pip-*|sgl_kernel*|sglang_kernel*) ;; *) [[ -e $vsite/${e##*/} ]] || ln -s "$e" "$vsite/"; esac; done
}

start_pin() {
  local pin=$1 W=$B/$1 tb; tb=$(tarball "$pin") || exit 1
  mkdir -p "$W/src" "$W/log"
  tar xzf "$src_repo/.gpu-src/$tb" -C "$W/src" || exit 1
  # the release venv: a venv over the machine's torch 2.11+cu130 (the stand-in for the stack's torch nightly, as
  # torch_nightly leaves it); its own site-packages keep the two pins' kernel distributions apart
  # (the machine's python3 is itself a venv, so --system-site-packages would not see its torch; the build finds
  # torch's CMake files under the venv's own site-packages: its distributions are linked in, pip's own excepted)
  release_venv "$W/venv" || exit 1
  for tool in cmake ctest ninja; do ln -s "$(command -v "$tool")" "$W/venv/bin/$tool" || exit 1; done
  "$W/venv/bin/python" -c 'import torch; print("== release venv", __import__("sys").prefix, "torch", torch.__version__)' || exit 1
  local archs; archs=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1].split(",")))' "$TARGETS")
  cat >"$W/vars.json" <<JSON
{"sglang_stack_source_dir": "$W/src/sglang", "sglang_stack_venv": "$W/venv",
 "sglang_stack_cuda_home": "/usr/local/cuda", "sglang_stack_cuda_cccl_include_dir": "/usr/local/cuda/include/cccl",
 "sglang_stack_root": "$W/opt", "sgl_kernel_sm120_log_dir": "$W/log",
 "sgl_kernel_sm120_wheel_cache_dir": "$W/wheels", "sgl_kernel_sm120_build_root": "$W/build",
 "sglang_stack_kernel_patches": ["cmake_policy_guards", "cccl_include", "fa3_soft_fallback", "drop_sparse_attn",
                              "skip_fa3_build", "sm120_only"],
 "sglang_stack_target_archs": $archs, "sgl_kernel_sm120_system_packages": [],
 "sgl_kernel_sm120_cmake_requirement": "", "sgl_kernel_sm120_max_jobs": ${MAX_JOBS:-16},
 "sgl_kernel_sm120_extra_cmake_args": ["-DNUMA_INCLUDE_DIR=$B/numa/usr/include", "-DNUMA_LIB_DIR=$NUMA"],
 "sgl_kernel_sm120_library_dirs": ["$NUMA"],
 "sgl_kernel_sm120_source_cache": "$B/cache",
 "sgl_kernel_sm120_source_placeholders_allowed": ["repo-triton", "repo-flash-attention"],
 "sgl_kernel_sm120_pip_extra_args": "--no-index", "sgl_kernel_sm120_progress_interval": 10,
 "sgl_kernel_sm120_keep_build_dir": true, "ansible_python_interpreter": "$(command -v python3)", "gpu_out": "$W"}
JSON
  echo "== $(date -u +%T) $pin: starting ansible-playbook (log $W/run.log)"
  (cd "$R" && LD_LIBRARY_PATH=$NUMA setsid nohup python3 "$B/site/bin/ansible-playbook" -i localhost, -c local \
    tests/gpu/kernel_build.yml -e "@$W/vars.json" >"$W/run.log" 2>&1 < /dev/null & echo $! >"$W/pid")
}

start() {
  # one pin at a time: two builds at once on the 16-core machine both died halfway (most likely memory: nvcc jobs
  # on CUTLASS sources take several GiB each)
  (($# == 1)) || { echo "start takes exactly one pin (original | current)" >&2; exit 2; }
  setup_common
  for pin in "$@"; do start_pin "$pin"; done
  sleep 3
  for pin in "$@"; do echo "== $pin"; tail -4 "$B/$pin/run.log"; done
}

wait_for() {
  local limit=$1 t0=$SECONDS running
  while :; do
    running=0
    for W in "$B"/*/; do
      [[ -f $W/pid ]] || continue
      # setsid forks when it leads a process group, so the recorded pid may be gone: ask by the pin's vars file
      if pgrep -f "ansible-playbook.*$W/vars.json" >/dev/null 2>&1 || pgrep -f "ansible-playbook.*${W%/}/vars.json" >/dev/null 2>&1; then running=1; fi
    done
    ((running)) || break
    if ((SECONDS - t0 >= limit)); then
      for W in "$B"/*/; do [[ -f $W/pid ]] || continue
        echo "== $(date -u +%T) ${W%/}: $(grep -hoE '^\[[0-9]+/[0-9]+\]' "$W"/log/sgl-kernel-build-*.log 2>/dev/null | tail -1) $(tail -1 "$W/run.log")"; done
      return 3
    fi
    sleep 30
  done
  local rc=0
  for W in "$B"/*/; do [[ -f $W/pid ]] || continue
    echo "== ${W%/}: ansible-playbook finished"; tail -25 "$W/run.log"
    grep -q 'failed=0' "$W/run.log" || rc=1
  done
  return $rc
}

keep_pin() {  # what the role built and said, copied out before anything else can fail or run out of time
  local pin=$1 W=$B/$1 out=$2 whl
  mkdir -p "$out"
  cp "$W/run.log" "$out/ansible-playbook.log"
  cp "$W"/log/sgl-kernel-build-*.log "$out/sgl-kernel-build.log" 2>/dev/null
  cp "$W"/log/sgl-kernel-configure-*.log "$out/sgl-kernel-configure.log" 2>/dev/null
  cp "$W/kernel-build-result.json" "$out/" 2>/dev/null || { echo "no kernel-build-result.json" >&2; return 1; }
  python3 - "$out" <<'PY' || return 1
import json, os, sys
out = sys.argv[1]
result = json.load(open(os.path.join(out, "kernel-build-result.json")))
symbols = result.get("library_symbols")
if not symbols or "libraries" not in symbols:
    sys.exit("the role's library check left no result in kernel-build-result.json")
json.dump(symbols, open(os.path.join(out, "library-symbols.json"), "w"), indent=2, sort_keys=True)
print("== the role's library check: %s" % symbols.get("msg"))
PY
  whl=$(find "$W/wheels" -mindepth 2 -maxdepth 2 -name '*.whl' 2>/dev/null | sort | head -1)
  [[ -n $whl ]] || { echo "$pin: no wheel under $W/wheels: see $W/run.log" >&2; tail -5 "$W/run.log"; return 1; }
  cp "$whl" "$out/"
}

check_wheel() {  # PIN WHEEL VENV OUT: the wheel itself, not the import (which picks sm90/ on this GPU by design)
  local pin=$1 whl=$2 venv=$3 out=$4 rc=0
  stat -c '%s bytes %n' "$whl" | sed "s#$B/##" | tee "$out/wheel.txt"
  local U=$B/unpacked-$pin; rm -rf "$U"; mkdir -p "$U"; (cd "$U" && python3 -m zipfile -e "$whl" .)
  local sos; sos=$(cd "$U" && find . -name '*.so' | sort)
  [[ -n $sos ]] || { echo "$pin: no library in the wheel" >&2; return 1; }
  { for so in $sos; do echo "## ${so#./}"; nm -D --undefined-only "$U/$so" | c++filt | sed -E 's/^/   /'; done; } >"$out/nm-undefined.txt"
  echo "== $pin: sparse FlashAttention symbols undefined in the wheel (must be none):"
  if grep -E 'mha_(varlen_)?fwd_sparse' "$out/nm-undefined.txt"; then rc=1; else echo "   none"; fi
  # a real load of the installed package with no GPU visible: load_utils.py then picks sm100/ (the SM12x variant)
  CUDA_VISIBLE_DEVICES='' LD_LIBRARY_PATH=$NUMA "$venv/bin/python" - >"$out/load-no-gpu.txt" 2>&1 <<'PY' || rc=1
import ctypes, glob, os, sys
import torch
import sgl_kernel
pkg = os.path.dirname(sgl_kernel.__file__)
print("import sgl_kernel ok:", sgl_kernel.__file__, getattr(sgl_kernel, "__version__", "?"))
for so in sorted(glob.glob(os.path.join(pkg, "**", "*.so"), recursive=True)):
    if os.sep + "sm90" + os.sep in so:
        continue
    ctypes.CDLL(so, mode=os.RTLD_NOW)
    print("RTLD_NOW ok:", os.path.relpath(so, pkg))
ops = torch.ops.sgl_kernel
print("fwd_sparse registered:", hasattr(ops, "fwd_sparse"), "varlen_fwd_sparse registered:", hasattr(ops, "varlen_fwd_sparse"))
PY
  cat "$out/load-no-gpu.txt"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader >"$out/gpu.txt"
  { for so in $sos; do echo "## ${so#./}"; cuobjdump --list-elf "$U/$so" 2>&1 | sed -E 's/^/   /'; done; } >"$out/cuobjdump-list-elf.txt"
  echo "== $pin cubins by arch:"; grep -oE 'sm_[0-9]+[a-z]?' "$out/cuobjdump-list-elf.txt" | sort | uniq -c | tee "$out/cubin-archs.txt"
  return $rc
}

finish_pin() {
  local pin=$1 W=$B/$1 out=$B/out/$1 rc=0
  rm -rf "$out"; mkdir -p "$out"
  [[ -f $W/vars.json ]] || { echo "$pin was never started" >&2; return 1; }
  # without a built wheel the role would start the whole build again inside this call: refuse instead
  local whl; whl=$(find "$W/wheels" -mindepth 2 -maxdepth 2 -name '*.whl' 2>/dev/null | sort | head -1)
  [[ -n $whl ]] || { echo "$pin: no wheel under $W/wheels (the build did not finish): see $W/run.log" >&2; tail -5 "$W/run.log"; return 1; }
  # the role again, from a fresh copy of the tree: the wheel comes from its key's cache, then the install and the
  # role's own checks run (the library check included)
  rm -rf "$R.new" && cp -a "$src_repo" "$R.new" && rm -rf "$R.new/.whl" "$R.new/.gpu-src" && rm -rf "$R" && mv "$R.new" "$R"
  (cd "$R" && LD_LIBRARY_PATH=$NUMA python3 "$B/site/bin/ansible-playbook" -i localhost, -c local \
    tests/gpu/kernel_build.yml -e "@$W/vars.json" -v >"$out/ansible-playbook-rerun.log" 2>&1 </dev/null) || rc=1
  grep -E 'libraries|unresolved|ok=|failed=' "$out/ansible-playbook-rerun.log" | tail -8
  keep_pin "$pin" "$out" || rc=1
  rm -f "$out"/*.whl
  check_wheel "$pin" "$whl" "$W/venv" "$out" || rc=1
  tar czf "${OUT:-$B}/evidence-$pin.tar.gz" -C "$B/out" "$pin"
  return $rc
}

build() {  # PIN N: one call from a bare machine to the checked wheel, everything kept in $OUT as it comes
  local pin=$1 limit=${2:-480} out=${OUT:-$B/out}/$1
  start "$pin"
  wait_for "$limit" || { echo "$pin: the build did not finish within $limit s, or failed" >&2; keep_pin "$pin" "$out"; return 1; }
  keep_pin "$pin" "$out" || return 1
  check_wheel "$pin" "$out"/*.whl "$B/$pin/venv" "$out"
}

evidence() {  # PIN WHEEL: the checks on a wheel that an earlier call built through the role and brought back
  local pin=$1 whl; whl=$(readlink -f "$2") || exit 2
  [[ -f $whl ]] || { echo "no wheel at $2" >&2; exit 2; }
  # setup_common starts from an empty $B: a wheel the build left under it moves out first
  if [[ $whl == "$B"/* ]]; then mkdir -p /tmp/bw-wheel && cp "$whl" /tmp/bw-wheel/ && whl=/tmp/bw-wheel/${whl##*/}; fi
  local out=${OUT:-$B/out}/$pin W=$B/$1
  setup_common; mkdir -p "$out" "$W"
  release_venv "$W/venv" || exit 1
  "$W/venv/bin/python" -m pip install -q --no-index --no-deps "$whl" || exit 1
  check_wheel "$pin" "$whl" "$W/venv" "$out"
}

finish() {
  (($#)) || { echo "finish needs at least one pin" >&2; exit 2; }
  local rc=0
  for pin in "$@"; do finish_pin "$pin" || rc=1; done
  return $rc
}

jit() {  # NVFP4 JIT kernels only (no kernel build needed): SGLang's tree, tvm-ffi + flashinfer (CUTLASS headers) carried
  local pin=${1:-original} W=$B/jit-${1:-original} tb; tb=$(tarball "$pin") || exit 1
  local out=${OUT:-$B/out}/jit-$pin; mkdir -p "$out" "$B/site" "$W/src"
  # the script reads the collection's hardware profiles through the tree's collections/ link, as the unit user
  [[ -d $R ]] || { cp -a "$src_repo" "$R" && rm -rf "$R/.whl" "$R/.gpu-src"; } || exit 1
  chmod -R a+rX "$R"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$B/site" "$src_repo"/.whl/apache_tvm_ffi-*.whl \
    "$src_repo"/.whl/flashinfer_python-*.whl || exit 1
  [[ -d $W/src/sglang ]] || tar xzf "$src_repo/.gpu-src/$tb" -C "$W/src"
  id sglang >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin sglang
  local state=$W/state cache=$W/cache-svc; mkdir -p "$state" "$cache" "$W/jit-out"; chown sglang "$state" "$cache" "$W/jit-out"
  chmod -R a+rX "$B/site" "$W/src"; chmod a+x "$B" "$W"
  local py; py=$(python3 -c 'import sys; print(sys.executable)')
  # the service's environment (roles/sglang_service/templates/sglang.env.j2 + the CUDA env file), as the unit user
  runuser -u sglang -- env -i HOME="$state" XDG_CACHE_HOME="$cache" TVM_FFI_CACHE_DIR="$cache/tvm-ffi" \
    FLASHINFER_WORKSPACE_BASE="$cache" TRITON_CACHE_DIR="$cache/triton" CUDA_HOME=/usr/local/cuda \
    CUDACXX=/usr/local/cuda/bin/nvcc PATH="$(dirname "$py"):/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    PYTHONPATH="$B/site" NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    TARGETS="$TARGETS" NVFP4_CAPABILITIES="${NVFP4_CAPABILITIES:-}" \
    timeout "${JIT_TIMEOUT:-420}" "$py" "$R/tests/gpu/nvfp4_jit_compile.py" "$W/src/sglang/python" "$W/jit-out/nvfp4-jit.json" \
    2>&1 | tee "$out/nvfp4-jit.log"
  cp "$W/jit-out/nvfp4-jit.json" "$out/" || { echo "no nvfp4-jit.json" >&2; return 1; }  # the unit user cannot write to $OUT
}

fijit() {  # FlashInfer's NVFP4 quantization and CUTLASS GEMM, built by FlashInfer's own JIT specs
  local out=${OUT:-$B/out}/flashinfer-fp4-jit; mkdir -p "$out" "$B/fisite"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$B/fisite" "$src_repo"/.whl/*.whl || exit 1
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader >"$out/gpu.txt"
  nvcc --version | tail -2 >"$out/nvcc.txt"; nvcc --list-gpu-arch | tr '\n' ' ' >>"$out/nvcc.txt"
  FLASHINFER_WORKSPACE_BASE=$B/fi-ws CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH \
    python3 "$src_repo/tests/gpu/flashinfer_fp4_jit.py" "$B/fisite" "$out/flashinfer-fp4-jit.json" \
    --timeout "${JIT_TIMEOUT:-400}" 2>&1 | tee "$out/flashinfer-fp4-jit.log"
  return "${PIPESTATUS[0]}"
}

cmd=${1:-}; shift || true
case $cmd in
  start) start "$@" ;;
  wait) wait_for "${1:-540}" ;;
  finish) finish "$@" ;;
  build) build "$@" ;;
  evidence) evidence "$@" ;;
  jit) jit "$@" ;;
  fijit) fijit ;;
  *) echo "usage: $0 start PIN | wait N | finish PIN... | build PIN N | evidence PIN WHEEL | jit PIN | fijit" >&2; exit 2 ;;
esac
