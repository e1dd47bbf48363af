#!/usr/bin/env bash
# Run Molecule scenarios (make molecule), MOLECULE_JOBS at a time: usage run-scenarios.sh TIMEOUT "EXTRA ARGS" SCENARIO...
# - Listed scenarios that do not exist (yet) are reported and skipped; scenario directories that are not listed
#   fail the run (a scenario nobody runs is a scenario that rots).
# - A scenario without tests/test_*.py fails: testinfra would "pass" it without checking anything.
# - Every scenario runs even after a failure; a timing table and the overall result come at the end.
# - Without the upstream source bundle (a user's clone), tests/sandbox/build_sglang_mirror.sh builds no SGLang mirror
#   and writes its reason to .cache/mirror/sglang.skip: the scenarios that install SGLang from the mirror (they name
#   sandbox_sglang_mirror or /srv/mirror in their YAML, or converge site.yml / rollout.yml) are reported as skipped.
set -uo pipefail
timeout_s=$1; extra=$2; shift 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 2

# MOLECULE_ALL (from the Makefile) is the complete run order; a subset may be asked for on the command line.
declare -A listed=()
for s in ${MOLECULE_ALL:-"$@"}; do listed[$s]=1; done
unlisted=()
for d in molecule/*/molecule.yml; do
  s=$(basename "$(dirname "$d")")
  [[ -n ${listed[$s]:-} ]] || unlisted+=("$s")
done
if ((${#unlisted[@]})); then
  echo "molecule scenarios not in MOLECULE_ALL (add them to the Makefile in run order): ${unlisted[*]}" >&2
  exit 2
fi

# MOLECULE_JOBS scenarios run side by side (each has its own container name, all share the image and the pip
# cache); every scenario logs to .cache/molecule-logs/<scenario>.log and a failed one prints its log's tail.
jobs=${MOLECULE_JOBS:-1}
logs=$repo/.cache/molecule-logs
mkdir -p "$logs"
total_start=$SECONDS

run_one() {  # run_one SCENARIO: writes $logs/SCENARIO.result = "<status> <seconds>"
  local s=$1 start=$SECONDS rc status
  # shellcheck disable=SC2086  # $extra is a list of extra molecule arguments
  timeout --signal=TERM --kill-after=60 "$timeout_s" molecule test -s "$s" $extra >"$logs/$s.log" 2>&1
  rc=$?
  if ((rc == 0)); then status=passed; else status="FAILED($rc)"; fi
  ((rc == 124)) && status=TIMEOUT
  if ((rc != 0)); then
    # a failed or killed run leaves its container behind; remove it so the next run starts clean
    timeout 300 molecule destroy -s "$s" >/dev/null 2>&1 || true
    echo "---------------- last lines of $logs/$s.log" >&2
    tail -n 60 "$logs/$s.log" >&2
  fi
  echo "$status $((SECONDS - start))" >"$logs/$s.result"
  echo "================ molecule test -s $s: $status in $((SECONDS - start))s ($(date -u +%H:%M:%S) UTC)"
}

mirror_skip=""
[[ -f $repo/.cache/mirror/sglang.skip ]] && mirror_skip=$(cat "$repo/.cache/mirror/sglang.skip")
order=()
for s in "$@"; do
  rm -f "$logs/$s.result"
  if [[ ! -f molecule/$s/molecule.yml ]]; then
    echo "absent 0" >"$logs/$s.result"; continue
  fi
  if [[ -n $mirror_skip ]] && grep -rqsE --include='*.yml' 'sandbox_sglang_mirror|/srv/mirror|import_playbook: \.\./\.\./(site|playbooks/rollout)\.yml' "molecule/$s"; then
    echo "================ molecule test -s $s: skipped: no SGLang mirror: $mirror_skip"
    echo "skipped 0" >"$logs/$s.result"; continue
  fi
  if ! compgen -G "molecule/$s/tests/test_*.py" >/dev/null; then
    echo "molecule/$s has no tests/test_*.py: the testinfra verifier would check nothing" >&2
    echo "NO-TESTS 0" >"$logs/$s.result"; continue
  fi
  order+=("$s")
done

for s in "${order[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "================ molecule test -s $s ($(date -u +%H:%M:%S) UTC, timeout ${timeout_s}s, log $logs/$s.log)"
  run_one "$s" &
  sleep 2   # stagger container creation
done
wait

failed=0
echo
echo "Molecule summary (wall time per scenario, $jobs at a time):"
for s in "$@"; do
  read -r status took <"$logs/$s.result" || { status=missing; took=0; }
  [[ $status == passed || $status == absent || $status == skipped ]] || failed=1
  printf '  %-18s %-10s %5ss\n' "$s" "$status" "$took"
done
total=$((SECONDS - total_start))
echo "  total: $((total / 60))m$((total % 60))s"
exit $failed
