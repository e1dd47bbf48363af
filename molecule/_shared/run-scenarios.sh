#!/usr/bin/env bash
# Run Molecule scenarios one after another (make molecule): usage run-scenarios.sh TIMEOUT "EXTRA ARGS" SCENARIO...
# - Listed scenarios that do not exist (yet) are reported and skipped; scenario directories that are not listed
#   fail the run (a scenario nobody runs is a scenario that rots).
# - A scenario without tests/test_*.py fails: testinfra would "pass" it without checking anything.
# - Every scenario runs even after a failure; a timing table and the overall result come at the end.
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

rows=(); failed=0; total_start=$SECONDS
for s in "$@"; do
  if [[ ! -f molecule/$s/molecule.yml ]]; then
    rows+=("$(printf '%-18s %-8s %6s' "$s" "absent" "-")")
    continue
  fi
  if ! compgen -G "molecule/$s/tests/test_*.py" >/dev/null; then
    echo "molecule/$s has no tests/test_*.py: the testinfra verifier would check nothing" >&2
    rows+=("$(printf '%-18s %-8s %6s' "$s" "NO-TESTS" "-")"); failed=1
    continue
  fi
  echo "================ molecule test -s $s ($(date -u +%H:%M:%S) UTC, timeout ${timeout_s}s)"
  start=$SECONDS
  # shellcheck disable=SC2086  # $extra is a list of extra molecule arguments
  timeout --signal=TERM --kill-after=60 "$timeout_s" molecule test -s "$s" $extra
  rc=$?
  took=$((SECONDS - start))
  if ((rc == 0)); then status=passed; else status="FAILED($rc)"; failed=1; fi
  ((rc == 124)) && status=TIMEOUT
  if ((rc != 0)); then
    # a failed or killed run leaves its container behind; remove it so the next run starts clean
    timeout 300 molecule destroy -s "$s" >/dev/null 2>&1 || true
  fi
  rows+=("$(printf '%-18s %-8s %5ss' "$s" "$status" "$took")")
  echo "================ molecule test -s $s: $status in ${took}s"
done

echo
echo "Molecule summary (wall time per scenario):"
printf '  %s\n' "${rows[@]}"
total=$((SECONDS - total_start))
echo "  total: $((total / 60))m$((total % 60))s"
exit $failed
