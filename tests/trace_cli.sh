# trace_cli.sh MODE USCHED_TRACE [ARGS...]: the usched_trace tool's command
# line for a ctest entry; prints what the entry matches, ending in
# "/ exit status N".
#   run        runs it with ARGS in a fresh folder holding a small trace
#              (trace.txt) and prints its output
#   convert    converts trace.txt to JSON, which python3's json module (Debian's
#              /usr/bin/python3, which bootstrap.sh installs) must
#              load, and to text twice over, which must come back byte for
#              byte
#   no-files   runs it with ARGS (which must fail) in that folder, and lists
#              what is there afterwards besides trace.txt and x.json (a
#              Chrome JSON file, which is no input)
mode=$1
tool=$2
shift 2
dir=$(mktemp -d) || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' INT TERM
cd "$dir" || exit 99
# Two workers: fiber 2 ("handler") is spawned by fiber 1, waits 3 us, runs
# 5 us and blocks; fiber 1 is preempted.
cat > trace.txt <<'TRACE'
# tracer: nop
# usched: policy=cfs nr_cpus=2 virtual_time=1 dropped=0
           fiber-1       [000] ....     0.000001000: usched_label: pid=2 chunk=0 last=1 text="handler"
           fiber-1       [000] ....     0.000002000: sched_wakeup_new: comm=handler pid=2 prio=120 target_cpu=001
           fiber-1       [000] ....     0.000002000: usched_wake: pid=2 reason=spawn waker_pid=1 waker_cpu=0 prev_cpu=-1 running=0 preempts=0 nr_running=1
          <idle>-0       [001] ....     0.000005000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=handler next_pid=2 next_prio=120
          <idle>-0       [001] ....     0.000005000: usched_stop: pid=0 reason=yield runnable=0 nr_running=1
         handler-2       [001] ....     0.000010000: sched_switch: prev_comm=handler prev_pid=2 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
         handler-2       [001] ....     0.000010000: usched_stop: pid=2 reason=block on=channel_recv runnable=0 nr_running=0
           fiber-1       [000] ....     0.000012000: sched_switch: prev_comm=fiber prev_pid=1 prev_prio=120 prev_state=R+ ==> next_comm=swapper/0 next_pid=0 next_prio=120
           fiber-1       [000] ....     0.000012000: usched_stop: pid=1 reason=preempt_tick runnable=1 nr_running=1
TRACE
echo '{"traceEvents": []}' > x.json
case $mode in
  run)
    out=$("$tool" "$@" 2>&1); status=$?
    echo "$out / exit status $status" ;;
  convert)
    "$tool" convert trace.txt t.json; s1=$?
    n=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["traceEvents"]))' t.json 2>&1)
    "$tool" convert trace.txt again.txt && "$tool" convert again.txt again2.txt; s2=$?
    if cmp -s again.txt again2.txt; then same=same; else same=different; fi
    echo "json: $n events / text twice: $same / exit status $s1 $s2" ;;
  no-files)
    out=$("$tool" "$@" 2>&1); status=$?
    echo "$out / left: [$(ls | grep -v -e '^trace.txt$' -e '^x.json$' | tr '\n' ' ')] / exit status $status" ;;
  *)
    echo "trace_cli.sh: '$mode' is not a mode; expected run, convert or no-files"
    exit 2 ;;
esac
