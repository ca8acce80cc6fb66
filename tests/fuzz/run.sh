#!/bin/sh
# Run libFuzzer targets one after another (one fuzzing process at a time), each
# for a bounded time, and report executions and crashes per target from
# libFuzzer's final stats. Exit status 1 when any target crashed.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...      (what `make fuzz` runs)
set -u
dir=$1
seconds=$2
shift 2
here=$(dirname "$0")
crashes_dir=$dir/crashes
mkdir -p "$crashes_dir"
failed=0
summary=$dir/summary.txt
: >"$summary"
for t in "$@"; do
  bin=$dir/$t
  if [ ! -x "$bin" ]; then
    echo "$t: not built ($bin)" >&2
    failed=1
    continue
  fi
  corpus=$dir/corpus/$t
  seeds=$here/corpus/$t
  log=$dir/$t.log
  mkdir -p "$corpus" "$seeds"
  dict=
  [ -f "$here/$t.dict" ] && dict="-dict=$here/$t.dict"
  before=$(ls "$crashes_dir" | grep -c "^$t-" || true)
  start=$(date +%s)
  # -timeout: an input slower than 30 s is reported as a crash (a hang);
  # -rss_limit_mb / -malloc_limit_mb: so is one that needs more than 2 GB.
  "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes_dir/$t-" $dict "$corpus" "$seeds" >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  after=$(ls "$crashes_dir" | grep -c "^$t-" || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ -z "$execs" ]; then # no final stats (killed): the last status line
    execs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
  fi
  crashes=$((after - before))
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
  line="$t: ${execs:-0} executions, $crashes crashes, $((end - start)) s (exit $rc; log $log)"
  echo "$line" | tee -a "$summary"
  if [ "$crashes" -ne 0 ]; then
    failed=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|\*\*\* fuzz invariant|artifact_prefix|Test unit written)' "$log" | head -n 8 | sed 's/^/    /'
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: crashes found; inputs in $crashes_dir (replay: $dir/<target> <file>)" >&2
  exit 1
fi
echo "fuzz: no crashes"
