# bench_cli.sh MODE PROGRAM [ARGS...]: runs one of the bundled benchmark
# programs for a ctest entry and prints "<what it printed> / exit status N",
# which the entry matches with PASS_REGULAR_EXPRESSION (ctest counts a
# crashed program as failed whatever it printed; this way the status is part
# of what is matched). Run it with sh; MODE is one of
#   run              stdout and stderr together
#   one-cpu          the same, pinned to the first CPU this shell may use
#   no-gnuplot       the same, with a PATH that holds no gnuplot
#   fake-gnuplot     the same, with a gnuplot on PATH that succeeds without
#                    plotting (so that the test does not depend on the host's)
#   failing-gnuplot  stderr only, with a gnuplot on PATH that fails with
#                    status 3 and one line of complaint, and
#                    --plot <a fresh folder>/p.png added to the arguments
mode=$1
shift
fake=$(mktemp -d) || exit 99
trap 'rm -rf "$fake"' EXIT
trap 'exit 143' INT TERM  # a ctest timeout: still remove the folder
fake_gnuplot() {
  printf '#!/bin/sh\necho "gnuplot: cannot plot here" >&2\nexit %s\n' "$1" > "$fake/gnuplot"
  chmod +x "$fake/gnuplot"
}
case $mode in
  run)
    out=$("$@" 2>&1); status=$? ;;
  one-cpu)
    cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
    out=$(taskset -c "$cpu" "$@" 2>&1); status=$? ;;
  no-gnuplot)
    out=$(PATH=/nonexistent "$@" 2>&1); status=$? ;;
  fake-gnuplot)
    fake_gnuplot 0
    out=$(PATH="$fake:$PATH" "$@" 2>&1); status=$? ;;
  failing-gnuplot)
    fake_gnuplot 3
    out=$(PATH="$fake:$PATH" "$@" --plot "$fake/p.png" 2>&1 >/dev/null); status=$? ;;
  *)
    echo "bench_cli.sh: '$mode' is not a mode; expected run, one-cpu, no-gnuplot, fake-gnuplot or failing-gnuplot"
    exit 2 ;;
esac
echo "$out / exit status $status"
