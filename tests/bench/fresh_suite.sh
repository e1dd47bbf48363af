#!/usr/bin/env bash
# Fresh-machine suite benchmark (a measurement, not a test): what CI's `bash .ci/run` costs on a machine
# that has never run it. One run: a fresh clone of REV (default HEAD) in a new directory, `../shared` beside it as
# CI has it, a sandbox image tag that does not exist yet (so `make image` builds it from debootstrap), an empty pip
# cache for the host venv (.venv) and an empty .cache in the clone (the sandbox's pip cache, the SGLang mirror, the
# sanity venv). Then `CI=true bash .ci/run` under a 90-minute bound (CI's), and the step and scenario timings into
# docs/benchmarks/suite-fresh-<date>.md. Goal: at most 45 minutes.
#
#   bash tests/bench/fresh_suite.sh            # HEAD; most of an hour; needs podman, nothing else running
#   bash tests/bench/fresh_suite.sh <rev>
#
# What it cannot make fresh: the Debian and PyPI mirrors this machine reaches (their own caches), the kernel's page
# cache, and podman's storage of other images. Nothing else may run on the machine meanwhile (Molecule container
# names are shared; the numbers would be the other work's too): the script refuses to start while a molecule run or
# another `make test` is alive.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
REV=$(git rev-parse --short=12 "${1:-HEAD}")
BOUND_S=${FRESH_SUITE_BOUND_S:-5400}
STAMP=$(date -u +%Y%m%d-%H%M%S)
WORK=${FRESH_SUITE_DIR:-/tmp/bw-fresh-$STAMP}
OUT=${OUT_MD:-$ROOT/docs/benchmarks/suite-fresh-$(date -u +%Y%m%d).md}
IMAGE=localhost/blackwell-sandbox:fresh-$STAMP

if pgrep -f 'molecule (test|converge)' >/dev/null || pgrep -f 'make( --no-print-directory)? (test|molecule)' >/dev/null; then
  echo "fresh_suite: a molecule run or make test is running on this machine; the numbers would be shared: stop it first" >&2
  exit 2
fi
shared=$(cd "$ROOT/.." && pwd)/shared
[[ -d $shared/upstream ]] || { echo "fresh_suite: $shared/upstream missing (CI has it beside the clone)" >&2; exit 2; }

mkdir -p "$WORK"
git clone -q --no-local "$ROOT" "$WORK/main"
git -C "$WORK/main" checkout -q "$REV"
ln -s "$shared" "$WORK/shared"
mkdir -p "$WORK/pip-cache"
log=$WORK/ci.log
echo "fresh_suite: clone $WORK/main at $REV, image $IMAGE (new), log $log, bound ${BOUND_S}s"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$SECONDS
rc=0
(
  cd "$WORK/main"
  export CI=true PIP_CACHE_DIR=$WORK/pip-cache BLACKWELL_SANDBOX_IMAGE=$IMAGE SANDBOX_IMAGE=$IMAGE
  timeout --signal=TERM --kill-after=120 "$BOUND_S" bash .ci/run
) >"$log" 2>&1 || rc=$?
took=$((SECONDS - start))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

steps=$(sed -n '/^======== make test steps/,/^======== make test:/p' "$log" | grep -E '^  [a-z]' || true)
scenarios=$(grep -E '^================ molecule test -s [a-z_0-9]+: ' "$log" | sed -E 's/^================ molecule test -s //' || true)
image_line=$(grep -E 'done: .*blackwell-sandbox|is up to date' "$log" | tail -n 1 || true)
verdict=$(grep -E '^======== make test: ' "$log" | tail -n 1 || echo "no verdict line (rc $rc)")

mkdir -p "$(dirname "$OUT")"
{
  echo "# Fresh-machine suite run, $(date -u +%Y-%m-%d)"
  echo
  # shellcheck source=/dev/null
  echo "Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), podman $(podman --version | awk '{print $3}')."
  echo "Commit: $REV. Script: tests/bench/fresh_suite.sh (fresh clone, new image tag, empty pip caches, \`CI=true bash .ci/run\`)."
  echo "Load average (1/5/15 min) before: $load_before; after: $load_after."
  echo
  echo "**Result: ${verdict#======== }, ${took} s wall ($((took / 60))m$((took % 60))s); goal <= 2700 s (45 min); CI bound 5400 s.**"
  echo
  echo "Image: ${image_line:-not found in the log}"
  echo
  echo "| step | status | s |"
  echo "|---|---|---|"
  while read -r n st sec; do [[ -n ${n:-} ]] && echo "| $n | $st | ${sec%s} |"; done <<<"$steps"
  echo
  echo "Molecule scenarios (MOLECULE_JOBS at a time; the molecule step includes the image build and the mirror):"
  echo
  echo "| scenario | result |"
  echo "|---|---|"
  while read -r line; do [[ -n $line ]] && echo "| ${line%%:*} | ${line#*: } |"; done <<<"$scenarios"
} >"$OUT"
echo "fresh_suite: rc $rc in ${took}s; wrote $OUT"
podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
[[ -n ${FRESH_SUITE_KEEP:-} ]] || rm -rf "$WORK/pip-cache"
exit "$rc"
