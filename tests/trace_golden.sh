# trace_golden.sh USCHED_SIM GOLDEN WORKLOAD: the simulator's ftrace text
# for a tiny deterministic run, twice, against the golden file; prints
# what the ctest entry matches, ending in "/ exit status N N".
#
# The run is `usched_sim --topology "pack:1 core:2 pu:1" --policy cfs
# --trace FILE -- file WORKLOAD`. A deliberate change to what is recorded
# (a new field, another cost default, a scheduling change) changes the
# file; regenerate it from the repository root with
#   build/dev/sim/usched_sim --topology "pack:1 core:2 pu:1" --policy cfs --trace tests/data/trace_golden.txt -- file tests/data/trace_golden_workload.txt
# and review the diff as the change's record of what it altered.
sim=$1
golden=$2
workload=$3
dir=$(mktemp -d) || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' INT TERM
# The run is the simulator's defaults alone: no USCHED_* variable of the
# calling environment reaches it.
for v in $(env | sed -n 's/^\(USCHED_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
"$sim" --topology "pack:1 core:2 pu:1" --policy cfs --trace "$dir/a.txt" -- file "$workload" > /dev/null; s1=$?
"$sim" --topology "pack:1 core:2 pu:1" --policy cfs --trace "$dir/b.txt" -- file "$workload" > /dev/null; s2=$?
if cmp -s "$dir/a.txt" "$dir/b.txt"; then twice=same; else twice=different; fi
if cmp -s "$dir/a.txt" "$golden"; then gold=matches; else gold="differs: $(diff "$golden" "$dir/a.txt" | head -5 | tr '\n' ' ')"; fi
echo "$(wc -l < "$dir/a.txt") lines, twice: $twice, golden: $gold / exit status $s1 $s2"
