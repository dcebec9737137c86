# sim_cli.sh MODE USCHED_SIM [ARGS...]: the simulator's command line for a
# ctest entry; prints what the entry matches, ending in "/ exit status N".
#   twice      runs it twice with ARGS and says whether stdout and the
#              USCHED_STATS=json report were byte for byte the same
#   no-files   runs it with --trace and --json into a fresh folder and ARGS
#              (which must fail), and lists what it left there
mode=$1
sim=$2
shift 2
dir=$(mktemp -d) || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' INT TERM
case $mode in
  twice)
    USCHED_STATS=json "$sim" "$@" > "$dir/a.out" 2> "$dir/a.err"; s1=$?
    USCHED_STATS=json "$sim" "$@" > "$dir/b.out" 2> "$dir/b.err"; s2=$?
    if cmp -s "$dir/a.out" "$dir/b.out" && cmp -s "$dir/a.err" "$dir/b.err"; then same=same; else same=different; fi
    echo "$(wc -c < "$dir/a.out") bytes, $(wc -c < "$dir/a.err") of statistics, $same / exit status $s1 $s2" ;;
  no-files)
    out=$("$sim" --trace "$dir/trace.txt" "$@" 2>&1); status=$?
    echo "$out / left: [$(ls "$dir")] / exit status $status" ;;
  *)
    echo "sim_cli.sh: '$mode' is not a mode; expected twice or no-files"
    exit 2 ;;
esac
