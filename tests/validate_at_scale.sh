# validate_at_scale.sh SCRIPT BUILD: scripts/validate-at-scale.sh as it is
# used, for a ctest entry: packs the build folder BUILD (--pack), runs the
# pack's copy of the script with --quick from the pack's launchers, and
# prints what the page holds: each table's heading and its rows, the cells
# that are not "median [min..max]" or a ratio, the runs that failed or were
# skipped, and the exit status.
script=$1
build=$2
# Inside the build folder: the pack's copies of the libraries are the
# build's own output, not libraries a machine must have installed
# (scripts/check-packages.sh skips what lies under the build folder).
dir=$(mktemp -d "$build/validate-at-scale.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' INT TERM
if ! sh "$script" --pack "$build" "$dir/pack" > "$dir/pack.log" 2>&1; then
  echo "--pack failed: $(tail -n 1 "$dir/pack.log")"
  exit 1
fi
"$dir/pack/validate-at-scale.sh" --quick "$dir/pack" "$dir/out" 2> "$dir/run.log"
status=$?
page=$dir/out/validate-at-scale.md
if [ ! -f "$page" ]; then
  echo "no page: $(tail -n 1 "$dir/run.log") / exit status $status"
  exit 1
fi
awk -F ' [|] ' '
  /^## / { if (h != "") printf "%s: %d rows / ", h, n; h = substr($0, 4); n = 0; next }
  /^[|] / && !/^[|] (mode|policy) [|]/ {
    ++n
    # The comparison tables: mode | run | samples | p50 | p90 | p99 | p99.9.
    if ($1 ~ /^[|] (cfs|cfs-v5[.]9|steal|threads)$/ && h !~ /^usched_sim/) {
      for (i = 3; i <= 7; ++i) {
        c = $i
        sub(/ [|]$/, "", c)
        if (c !~ /^[0-9]+ [[][0-9]+[.][.][0-9]+[]]$/ && c !~ /^([0-9]+[.][0-9][0-9]|-)$/) ++bad
      }
    }
  }
  END { printf "%s: %d rows / malformed cells: %d / ", h, n, bad + 0 }' "$page"
echo "failed or skipped: $(grep -c 'failed\|skipped' "$page") / exit status $status"
