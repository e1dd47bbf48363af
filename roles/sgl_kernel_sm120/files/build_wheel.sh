#!/usr/bin/env bash
# Build the sgl-kernel wheel (blackwell.sglang.sgl_kernel_sm120). Runs under async; everything goes to the log.
#   build_wheel.sh <python> <kernel_dir> <build_dir> <wheel_dir> <log> <key>
# The environment (CMAKE_ARGS, CMAKE_POLICY_VERSION_MINIMUM, CUDA_HOME, CPLUS_INCLUDE_PATH, ...) comes from the task.
# The wheel lands in <wheel_dir> only when the build succeeded (written to a temp dir, then renamed), so a
# half-built wheel is never taken for a cached one.
set -uo pipefail
py=$1 kernel_dir=$2 build_dir=$3 wheel_dir=$4 log=$5 key=$6

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
