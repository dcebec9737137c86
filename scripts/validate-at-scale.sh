#!/bin/sh
# validate-at-scale.sh: the simulator against the machine it runs on, at the
# machine's full width, in one command that writes one markdown page.
#
#   scripts/validate-at-scale.sh --pack BUILD DIR
#       On the build host: copy usched_sim and usched_schbench from the build
#       folder BUILD, the shared libraries they load (all but the C library's
#       own: libc, libm, libpthread, libdl, librt and the loader), this
#       script and a launcher per program into DIR. A launcher only sets
#       LD_LIBRARY_PATH to DIR/lib and runs the program through the target's
#       own loader, so DIR runs on any x86-64 Linux whose glibc is at least
#       the build host's (DIR/BUILD-INFO names it), with nothing installed.
#       The programs lose their debug information (strip --strip-debug).
#
#   scripts/validate-at-scale.sh [--quick] BIN OUTDIR
#       On the machine to validate against: BIN is a packed DIR or a build
#       folder; OUTDIR receives validate-at-scale.md (the tables) and raw/
#       (every run's output and JSON). It runs, at the defaults (every
#       USCHED_* variable unset) and on every CPU of the machine:
#         1. usched_sim --validate --quick: the real runtime and the
#            simulator side by side on the host's own topology, with its
#            counters;
#         2. the schbench clone (usched_schbench) in fiber mode under cfs,
#            cfs-v5.9 and steal and in kernel-thread mode (--threads), three
#            repeats, the four modes alternating within each repeat so that
#            a drift of the machine touches them alike, over three command
#            lines: seed 000's scaled to the machine (-m 2 -t N/2 -c 1000000
#            -s 1000) and the hardware README's two (-m 2 -t 8, and -m 2 -t 8
#            -c 1000000 -s 1000), each with -C 0 (schbench of 2020 has no
#            message-thread think), -i 0 and the budgeted -r and -w below;
#         3. usched_sim with the same command lines on the host's topology
#            (its default: hwloc's view of this machine), seeds 1..3, with
#            the runtime's defaults the clone runs (USCHED_FORK_BALANCE=0,
#            USCHED_JOIN_HANDOFF=1) rather than the kernel's;
#         4. the page: per command line, the median [min..max] of samples,
#            p50, p90, p99 and p99.9 for each mode on the machine and in the
#            simulator, and the simulator's medians over the machine's.
#       The kernel-thread rows are set against the simulator under cfs, the
#       policy that re-creates the kernel's balancer.
#       --quick: 1 s runs without warm-up (the suite's check, about a minute
#       at 2 CPUs).
#
# Budget at 16 CPUs: the clone runs (6 + 10 + 10 s) x 4 modes x 3 repeats
# = 312 s, the validation about 15 s, the simulations a few seconds: about
# 6 minutes. Every run has a timeout, a run of the clone that would end
# past 7.5 minutes is skipped and the simulations are cut at 7 min 50 s
# (the page says which), so the whole stops by itself within 8. Exit status: 0 when every run gave its numbers, 1 when one
# failed or was skipped (the page still lists the others), 2 for bad
# arguments or binaries that do not start.
#
# Plain POSIX sh, awk and coreutils: what a bare machine has.
set -u

me=validate-at-scale.sh
die() {
  echo "$me: $*" >&2
  exit 2
}
usage="usage: $me --pack BUILD DIR | $me [--quick] BIN OUTDIR"

# ---- --pack ---------------------------------------------------------------

# libs_of BINARY: the absolute paths of the shared libraries it loads, as
# ldd resolves them here (the loader itself and the vDSO have no "=> path").
libs_of() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
}

# is_libc NAME: the C library's own objects, which the target's glibc
# provides and must match its loader.
is_libc() {
  case $1 in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*) return 0 ;;
  esac
  return 1
}

pack() {
  build=$1
  dir=$2
  for p in sim/usched_sim bench/schbench/usched_schbench; do
    [ -x "$build/$p" ] || die "--pack: '$build/$p' is not there; expected a build folder with usched_sim and usched_schbench built"
  done
  command -v ldd > /dev/null 2>&1 || die "--pack: ldd not found; it lists the libraries to copy"
  mkdir -p "$dir/bin" "$dir/lib" || die "--pack: cannot create '$dir'"
  for p in sim/usched_sim bench/schbench/usched_schbench; do
    name=${p##*/}
    cp "$build/$p" "$dir/bin/$name" || die "--pack: copying $p failed"
    # Without its debug information a dev build's program is a twentieth of
    # its size, and the folder travels.
    if command -v strip > /dev/null 2>&1; then strip --strip-debug "$dir/bin/$name" || die "--pack: strip failed"; fi
    for lib in $(libs_of "$build/$p"); do
      base=${lib##*/}
      is_libc "$base" && continue
      # -L: the file a versioned link points to, under the name the
      # program asks for.
      cp -L "$lib" "$dir/lib/$base" || die "--pack: copying $lib failed"
    done
    cat > "$dir/$name" << EOF
#!/bin/sh
# Runs bin/$name with the libraries packed beside it (lib/), through this
# machine's own loader.
here=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/bin/$name" "\$@"
EOF
    chmod +x "$dir/$name"
  done
  cp "$0" "$dir/$me" && chmod +x "$dir/$me"
  {
    echo "packed from $build on $(uname -n), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "needs glibc >= $(ldd --version 2>&1 | awk 'NR == 1 { print $NF }') (x86-64 Linux)"
    printf 'libraries:'
    for lib in "$dir"/lib/*; do printf ' %s' "${lib##*/}"; done
    echo
    echo "run: ./$me . OUTDIR"
  } > "$dir/BUILD-INFO"
  echo "$me: packed into $dir; on the target run: $dir/$me $dir OUTDIR"
}

if [ "${1:-}" = "--pack" ]; then
  [ $# -eq 3 ] || die "--pack takes BUILD and DIR; $usage"
  pack "$2" "$3"
  exit 0
fi

# ---- the run --------------------------------------------------------------

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
[ $# -eq 2 ] || die "$usage"
bin=$1
out=$2
case $bin in -*) die "unknown flag '$bin'; $usage" ;; esac

if [ -x "$bin/usched_sim" ] && [ -x "$bin/usched_schbench" ]; then
  sim=$bin/usched_sim
  clone=$bin/usched_schbench
elif [ -x "$bin/sim/usched_sim" ] && [ -x "$bin/bench/schbench/usched_schbench" ]; then
  sim=$bin/sim/usched_sim
  clone=$bin/bench/schbench/usched_schbench
else
  die "'$bin' has neither usched_sim and usched_schbench (a --pack folder) nor sim/usched_sim and bench/schbench/usched_schbench (a build folder)"
fi
"$sim" --help > /dev/null 2>&1 || die "'$sim' does not start: $("$sim" --help 2>&1 | head -n 1)"
"$clone" --help > /dev/null 2>&1 || die "'$clone' does not start: $("$clone" --help 2>&1 | head -n 1)"
mkdir -p "$out/raw" || die "cannot create '$out/raw'"
page=$out/validate-at-scale.md
results=$out/raw/results.tsv
: > "$results" || die "cannot write '$results'"

# The defaults, on every CPU: no variable narrows the width or changes a
# setting under the clone or the simulator.
for v in $(env | sed -n 's/^\(USCHED_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

cpus=$(nproc 2> /dev/null || getconf _NPROCESSORS_ONLN)
half=$((cpus / 2))
[ "$half" -ge 1 ] || half=1
repeats=3
if [ "$quick" -eq 1 ]; then
  r_def=1 r_long=1 warmup=0 deadline=240 limit=280
else
  # Budgeted so that the whole fits in 8 minutes at 16 CPUs (see the top):
  # no machine run starts that would end past `deadline`, and the
  # simulations are cut at `limit`.
  r_def=6 r_long=10 warmup=1 deadline=450 limit=470
fi
modes="cfs cfs-v5.9 steal threads"
common="-C 0 -i 0 -w $warmup"
# id|title|flags (the runtime added per line)
lines="seed000|seed 000, scaled to $cpus CPUs|-m 2 -t $half -c 1000000 -s 1000 -r $r_long
readme-default|hardware README, default think and sleep|-m 2 -t 8 -r $r_def
readme-saturated|hardware README, the seed-000 shape at 16 CPUs|-m 2 -t 8 -c 1000000 -s 1000 -r $r_long"

start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
have_timeout=0
command -v timeout > /dev/null 2>&1 && have_timeout=1
# bounded SECONDS CMD...: CMD, killed if it runs past SECONDS.
bounded() {
  bound_s=$1
  shift
  if [ "$have_timeout" -eq 1 ]; then timeout -k 5 "$bound_s" "$@"; else "$@"; fi
}
failures=0

# numbers JSON: "samples p50 p90 p99 p99.9" from a run's --json file (the
# first "samples" is the run's; the first row with a percentile is in
# "percentiles", which comes before "curve").
numbers() {
  awk '
    function num(key,   i, s) {
      i = index($0, key)
      if (i == 0) return "-"
      s = substr($0, i + length(key))
      if (!match(s, /^[0-9]+/)) return "-"
      return substr(s, 1, RLENGTH)
    }
    { printf "%s\t%s\t%s\t%s\t%s\n", num("\"samples\":"), num("{\"p\":50,\"value\":"),
             num("{\"p\":90,\"value\":"), num("{\"p\":99,\"value\":"), num("{\"p\":99.9,\"value\":") }' "$1"
}

# record LINE MODE SOURCE REP JSON: one row of results.tsv; "failed" when
# the run left no numbers (counted from the file at the end: the loops
# that call this run in subshells).
record() {
  if [ -s "$5" ] && row=$(numbers "$5") && [ -n "$row" ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$row" >> "$results"
  else
    printf '%s\t%s\t%s\t%s\tfailed\n' "$1" "$2" "$3" "$4" >> "$results"
  fi
}

# 1. The validation table, first: it runs the real runtime too.
echo "$me: usched_sim --validate --quick ($(elapsed) s)" >&2
bounded 180 "$sim" --validate --quick > "$out/raw/validate.md" 2> "$out/raw/validate.err"
validate_status=$?
[ "$validate_status" -eq 0 ] || failures=$((failures + 1))

# 2. The clone on the machine.
rep=1
while [ "$rep" -le "$repeats" ]; do
  echo "$lines" | while IFS='|' read -r id title flags; do
    secs=$(echo "$flags" | awk '{ for (i = 1; i < NF; ++i) if ($i == "-r") print $(i + 1) }')
    for mode in $modes; do
      base=$out/raw/$id.$mode.machine.$rep
      rm -f "$base.json"
      if [ $(($(elapsed) + secs + 5)) -gt "$deadline" ]; then
        echo "skipped: the time budget ($deadline s) was spent" > "$base.out"
      else
        echo "$me: repeat $rep: $id: $mode ($(elapsed) s)" >&2
        if [ "$mode" = threads ]; then select=--threads; else select="--policy $mode"; fi
        # shellcheck disable=SC2086 # the flags are words
        bounded $((secs + 30)) "$clone" $flags $common $select --json "$base.json" > "$base.out" 2>&1
      fi
      record "$id" "$mode" machine "$rep" "$base.json"
    done
  done
  rep=$((rep + 1))
done

# 3. The simulator, on this machine's topology, with the runtime's defaults.
# The machine's runs are over, so a repeat's nine simulations run side by
# side (one CPU each); each is bounded by what is left of the whole's limit.
rep=1
while [ "$rep" -le "$repeats" ]; do
  left=$((limit - $(elapsed)))
  echo "$me: simulations, seed $rep ($(elapsed) s)" >&2
  # The loop runs in the pipe's subshell: the wait must be there too.
  echo "$lines" | {
    while IFS='|' read -r id title flags; do
      for policy in cfs cfs-v5.9 steal; do
        base=$out/raw/$id.$policy.sim.$rep
        rm -f "$base.json"
        (
          if [ "$left" -gt 0 ]; then
            export USCHED_FORK_BALANCE=0 USCHED_JOIN_HANDOFF=1
            # shellcheck disable=SC2086
            bounded "$left" "$sim" --policy "$policy" --seed "$rep" \
              -- schbench $flags $common --json "$base.json" > "$base.out" 2>&1
          else
            echo "skipped: the time limit ($limit s) was reached" > "$base.out"
          fi
          record "$id" "$policy" sim "$rep" "$base.json"
        ) &
      done
    done
    wait
  }
  rep=$((rep + 1))
done
failures=$((failures + $(grep -c 'failed$' "$results")))

# 4. The page.
topology=$(sed -n 's/.*"topology":"\([^"]*\)".*/\1/p' "$out/raw/seed000.cfs.sim.1.json" 2> /dev/null)
model=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo 2> /dev/null | head -n 1)
{
  echo "# usched_sim against this machine, at full width"
  echo
  echo "$cpus CPUs${model:+ ($model)}, Linux $(uname -r); the simulator's topology (hwloc's view of this host):"
  echo "${topology:-unknown}. Binaries: \`$sim\`, \`$clone\`."
  if [ "$quick" -eq 1 ]; then
    echo "--quick: 1 s runs, no warm-up."
  else
    echo "Runs of $r_def s (the default think and sleep) and $r_long s (one-second thinks), $warmup s of warm-up."
  fi
  echo
  echo "Each cell is the median [min..max] of $repeats runs, latencies in us: on the machine the schbench"
  echo "clone (usched fibers under the policy, or kernel threads with --threads), in the simulator"
  echo "\`usched_sim -- schbench\` with seeds 1..$repeats. The ratio row is the simulator's median over the"
  echo "machine's. Kernel threads are set against the simulator under cfs."
  echo
  echo "## usched_sim --validate --quick"
  echo
  if [ "$validate_status" -eq 0 ]; then
    cat "$out/raw/validate.md"
  else
    echo "failed (exit status $validate_status): $(head -n 1 "$out/raw/validate.err")"
  fi
  echo "$lines" | while IFS='|' read -r id title flags; do
    echo
    echo "## $title"
    echo
    echo "\`$flags $common\`"
    echo
    echo "| mode | run | samples | p50 | p90 | p99 | p99.9 |"
    echo "|---|---|---|---|---|---|---|"
    for mode in $modes; do
      simmode=$mode
      [ "$mode" = threads ] && simmode=cfs
      awk -F '\t' -v id="$id" -v mode="$mode" -v simmode="$simmode" '
        function sort(a, n,   i, j, t) {
          for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] > a[j]; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        }
        # The upper median of the sorted values, as usched_sim --validate takes it.
        function cell(src, k,   n, i, v) {
          n = cnt[src]
          if (n == 0) return "-"
          for (i = 1; i <= n; ++i) v[i] = val[src, k, i] + 0
          sort(v, n)
          med[src, k] = v[int(n / 2) + 1]
          return med[src, k] " [" v[1] ".." v[n] "]"
        }
        $1 == id && (($3 == "machine" && $2 == mode) || ($3 == "sim" && $2 == simmode)) && $5 != "failed" {
          n = ++cnt[$3]
          for (k = 1; k <= 5; ++k) val[$3, k, n] = $(4 + k)
        }
        $1 == id && $2 == mode && $3 == "machine" && $5 == "failed" { ++failed }
        END {
          label = mode == "threads" ? "machine (kernel threads)" : "machine"
          slabel = mode == "threads" ? "usched_sim (cfs)" : "usched_sim"
          line = "| " mode " | " label
          for (k = 1; k <= 5; ++k) line = line " | " cell("machine", k)
          print line (failed ? " (" failed " run(s) failed or skipped)" : "") " |"
          line = "| " mode " | " slabel
          for (k = 1; k <= 5; ++k) line = line " | " cell("sim", k)
          print line " |"
          line = "| " mode " | sim/machine"
          for (k = 1; k <= 5; ++k) {
            if (cnt["machine"] == 0 || cnt["sim"] == 0 || med["machine", k] == 0) line = line " | -"
            else line = line " | " sprintf("%.2f", med["sim", k] / med["machine", k])
          }
          print line " |"
        }' "$results"
    done
  done
  echo
  echo "Took $(elapsed) s. Every run's output and JSON: raw/."
} > "$page"

echo "$me: wrote $page ($(elapsed) s)" >&2
[ "$failures" -eq 0 ] || {
  echo "$me: $failures run(s) failed or were skipped; see $page and $out/raw/" >&2
  exit 1
}
exit 0
