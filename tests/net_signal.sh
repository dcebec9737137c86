# net_signal.sh SIGNAL PROGRAM [ARGS...]: starts one of the network examples
# (examples/net) with --port 0 and ARGS, waits for its "listening on" line,
# sends it SIGNAL (INT or TERM), and prints "<what it printed> / exit status
# N" for a ctest entry to match: a server that stops cleanly printed only its
# line and exited 0. Run it with sh. The waits are bounds, not timings: 10 s
# for the line, 10 s for the exit, then the server is killed and the entry
# fails on its status.
sig=$1
shift
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
trap 'exit 143' INT TERM
"$@" --port 0 > "$work/out" 2>&1 &
pid=$!
tries=0
until grep -q '^listening on 127\.0\.0\.1:[0-9]' "$work/out" 2>/dev/null; do
  tries=$((tries + 1))
  if [ $tries -gt 100 ] || ! kill -0 $pid 2>/dev/null; then break; fi
  sleep 0.1
done
kill -s "$sig" $pid 2>/dev/null
tries=0
while kill -0 $pid 2>/dev/null; do
  tries=$((tries + 1))
  if [ $tries -gt 100 ]; then kill -s KILL $pid; break; fi
  sleep 0.1
done
wait $pid
status=$?
echo "$(cat "$work/out") / exit status $status"
