#!/usr/bin/env bash
# Build the sgl-kernel wheel (blackwell.sglang.sgl_kernel_sm120). Runs under async; everything goes to the log.
#   build_wheel.sh <python> <kernel_dir> <build_dir> <wheel_dir> <log> <key> [wheel|configure]
# `configure` runs only CMake's configure + generate step into <build_dir> with what the wheel build would use
# (the same environment and CMAKE_ARGS, Ninja, CMAKE_PREFIX_PATH = the venv's site-packages as scikit-build-core
# sets it, the SABI component of the project's wheel.py-api) and exits with CMake's status: the role's offline
# check before the long build. <wheel_dir> is not touched then.
# The environment (CMAKE_ARGS, CMAKE_POLICY_VERSION_MINIMUM, CUDA_HOME, CPLUS_INCLUDE_PATH, ...) comes from the task.
# The wheel lands in <wheel_dir> only when the build succeeded (written to a temp dir, then renamed), so a
# half-built wheel is never taken for a cached one.
set -uo pipefail
py=$1 kernel_dir=$2 build_dir=$3 wheel_dir=$4 log=$5 key=$6 mode=${7:-wheel}

mkdir -p "$(dirname "$log")" "$(dirname "$wheel_dir")"
exec >"$log" 2>&1
echo "== sgl-kernel build $(date -u +%Y-%m-%dT%H:%M:%SZ) key=$key"
echo "== kernel dir: $kernel_dir"
echo "== build dir:  $build_dir (fresh)"
env | grep -E '^(CMAKE_|CUDA|CPLUS_INCLUDE_PATH|C_INCLUDE_PATH|MAX_JOBS|NVCC_|PATH=)' | sort | sed 's/^/== env: /'
"$py" -m pip --version | sed 's/^/== /'
cmake --version | head -1 | sed 's/^/== /'
"$CUDACXX" --version | tail -2 | sed 's/^/== /'

rm -rf "$build_dir"
mkdir -p "$build_dir"
if [[ $mode == configure ]]; then
  # CMAKE_ARGS split the way scikit-build-core splits it (shlex), never through eval
  mapfile -d '' cmake_args < <("$py" -c 'import os, shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(os.environ.get("CMAKE_ARGS", ""))))')
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  sabi=$("$py" - "$kernel_dir/pyproject.toml" <<'PY'
import re, sys
try:
    import tomllib
    with open(sys.argv[1], "rb") as f:
        api = tomllib.load(f).get("tool", {}).get("scikit-build", {}).get("wheel", {}).get("py-api", "")
except Exception:  # no tomllib (Python < 3.11) or no pyproject: no SABI hint, as a plain build
    api = ""
m = re.match(r"^cp3(\d+)$", api)
print("3.%s" % m.group(1) if m else "")
PY
)
  extra=()
  [[ -n $sabi ]] && extra=(-DSKBUILD_SABI_COMPONENT=Development.SABIModule "-DSKBUILD_SABI_VERSION=$sabi")
  echo "== configure only: cmake -S $kernel_dir -B $build_dir (CMAKE_PREFIX_PATH=$site${sabi:+, SABI $sabi})"
  start=$SECONDS
  cmake -S "$kernel_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$site" \
    "-DPython_EXECUTABLE=$py" "-DPython3_EXECUTABLE=$py" "${extra[@]}" "${cmake_args[@]}"
  rc=$?
  echo "== configure exited $rc after $((SECONDS - start)) s"
  [[ $rc -eq 0 && ! -f $build_dir/build.ninja ]] && { echo "== no build.ninja was generated"; rc=4; }
  exit "$rc"
fi
tmp_out=$(mktemp -d "$(dirname "$wheel_dir")/.incoming-$key.XXXXXX")
trap 'rm -rf "$tmp_out"' EXIT
start=$SECONDS
# SKBUILD_BUILD_DIR = scikit-build-core's build-dir setting (works with any pip; -C needs pip >= 23.1)
SKBUILD_BUILD_DIR="$build_dir" "$py" -m pip wheel --no-build-isolation --no-deps --no-cache-dir -v \
  -w "$tmp_out" "$kernel_dir"
rc=$?
echo "== pip wheel exited $rc after $((SECONDS - start)) s"
if [[ $rc -ne 0 ]]; then
  exit "$rc"
fi
shopt -s nullglob
wheels=("$tmp_out"/*.whl)
if [[ ${#wheels[@]} -ne 1 ]]; then
  echo "== expected exactly one wheel in $tmp_out, found ${#wheels[@]}"
  exit 3
fi
echo "$key" >"$tmp_out/BUILD_KEY"
rm -rf "$wheel_dir"
mv "$tmp_out" "$wheel_dir"
trap - EXIT
chmod 0755 "$wheel_dir"
echo "== wheel: $wheel_dir/$(basename "${wheels[0]}")"
echo "== sgl-kernel build finished $(date -u +%Y-%m-%dT%H:%M:%SZ)"
