#!/usr/bin/env bash
# `make test`: the suite's steps, each a `make <step>`, timed; the table at the end gives each step's wall time and
# the machine's CPU seconds (docs/testing.md, "Notes on the suite").
#
# upstream and deps run first: every other step needs them. Then two lanes run side by side: lint, sanity and unit
# one after another in the first, molecule in the second. Neither long step keeps the cores busy alone (on 2 cores:
# unit 88%, molecule 95%; docs/benchmarks.md): scenarios wait for systemd, services and health checks, unit tests
# for their ansible-playbook runs. The two share nothing that one writes while the other reads: unit tests use their
# own temporary directories, sanity its copy of the collection under .cache/ansible_collections, molecule its
# containers, logs and the read-only mirror.
#
# The first lane's steps write to .cache/test-logs/<step>.log, printed whole when the step ends, so that their lines
# do not interleave with molecule's (a line per scenario as it starts and ends; the scenarios' own logs are in
# .cache/molecule-logs). `tail -f` a step's log to follow it.
#
#   KEEP_GOING=1  a failed step does not stop the steps after it (upstream and deps always stop the suite)
#   SERIAL=1      every step one after another, all output live (no lanes)
#
# The step list and the lanes are this file's; the Makefile passes MAKE and those two variables.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
make=${MAKE:-make}
logs=.cache/test-logs
mkdir -p "$logs"
rm -f "$logs"/*.result "$logs"/*.log

# shellcheck source=tests/machine-cpu.sh
. tests/machine-cpu.sh

step() {  # step <name> [log]: make <name>, live or into <log>; writes $logs/<name>.result "<status> <s> <cpu-s>"
  local name=$1 log=${2:-} start cpu rc
  start=$(date +%s); cpu=$(busy_cpu)
  echo "======== make $name ($(date -u +%H:%M:%S) UTC${log:+, log $log})"
  if [[ -n $log ]]; then
    "$make" --no-print-directory "$name" >"$log" 2>&1; rc=$?
    { echo "======== make $name: its output ($log)"; cat "$log"; } | sed -u "s/^/[$name] /"
  else
    "$make" --no-print-directory "$name"; rc=$?
  fi
  local status=ok
  ((rc == 0)) || status=FAILED
  echo "$status $(($(date +%s) - start)) $(($(busy_cpu) - cpu))" >"$logs/$name.result"
  echo "======== make $name: $status in $(($(date +%s) - start))s ($(date -u +%H:%M:%S) UTC)"
  return "$rc"
}

lane() {  # lane <log?> <step>...: the steps one after another; the first failure ends the lane unless KEEP_GOING=1
  local to_log=$1 name failed=0
  shift
  for name in "$@"; do
    step "$name" ${to_log:+"$logs/$name.log"} || { failed=1; [[ ${KEEP_GOING:-} == 1 ]] || return 1; }
  done
  return "$failed"
}

start=$(date +%s); cpu0=$(busy_cpu)
checks=(lint sanity unit)
if step upstream && step deps; then
  if [[ ${SERIAL:-} == 1 ]]; then
    lane "" "${checks[@]}" molecule
  else
    echo "======== ${checks[*]} (one after another, logs in $logs) beside molecule"
    lane log "${checks[@]}" &
    first=$!
    lane "" molecule &
    second=$!
    wait "$first"; wait "$second"
  fi
fi

took=$(($(date +%s) - start)); cores=$(nproc)
echo "======== make test steps (wall time; the machine's CPU seconds meanwhile, all cores, side-by-side steps included):"
failed=""
for name in upstream deps "${checks[@]}" molecule; do
  [[ -f $logs/$name.result ]] || continue
  read -r status sec cpu <"$logs/$name.result"
  [[ $status == ok ]] || failed="$failed $name"
  printf '  %-10s %-7s %5ss  cpu %6ss\n' "$name" "$status" "$sec" "$cpu"
done
total_cpu=$(($(busy_cpu) - cpu0))
printf '  %-18s %5ss  cpu %6ss (%s%% of %s cores)\n' "whole suite" "$took" "$total_cpu" \
  "$((took > 0 ? total_cpu * 100 / (took * cores) : 0))" "$cores"
for name in upstream deps "${checks[@]}" molecule; do
  [[ -f $logs/$name.result ]] || failed="$failed $name(not-run)"
done
human="$((took / 60))m$((took % 60))s"
if [[ -n $failed ]]; then echo "======== make test: FAILED ($failed ) after $human"; exit 1; fi
echo "======== make test: all passed in $human"
