#!/usr/bin/env bash
# check-packages.sh: fail when the build, the tests or the main job use a file
# from a Debian package that scripts/bootstrap.sh does not install.
#
#   scripts/check-packages.sh BUILD_DIR -- COMMAND [ARGS...] [-- COMMAND ...]
#
# A machine that has been used for a while holds packages a fresh one lacks
# (an hwloc plugin changes what hwloc says; a tool makes a test pass), so a
# green run here proves little unless everything it touched is accounted for.
# What is "used":
#   - every header the build read (ninja's dependency log of BUILD_DIR);
#   - every shared object loaded by each COMMAND, by it or by any process it
#     starts, dlopen()ed plugins included (the dynamic loader's own trace,
#     LD_DEBUG=libs);
#   - the tools the build and the main job run (the compiler CMake found,
#     cmake, ninja, gnuplot, sh).
# What is allowed: the packages bootstrap.sh installs, everything they depend
# on (recursively, Depends and Pre-Depends, with what the packages provide),
# and the packages every Debian system has (Essential, or Priority required).
# Files under the source tree are the project's own. Anything else fails the
# check, naming the package (or "no package") and the file.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

usage() { echo "usage: scripts/check-packages.sh BUILD_DIR -- COMMAND [ARGS...] [-- COMMAND ...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
build=$1
shift
[ -d "$build" ] || { echo "check-packages: '$build' is not a build directory" >&2; exit 2; }
build=$(cd "$build" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- what is allowed ---------------------------------------------------------

scripts/bootstrap.sh --list > "$work/seeds"
dpkg-query -W -f='${Package}\t${Essential}\t${Priority}\t${Provides}\t${Pre-Depends}, ${Depends}\n' > "$work/installed"
awk -F'\t' '
  # Package names out of a dependency field: versions, architecture
  # qualifiers and alternatives dropped (every alternative counts).
  function names(field, out,   n, parts, i, p) {
    gsub(/\([^)]*\)/, "", field); gsub(/\|/, ",", field)
    n = split(field, parts, ",")
    for (i = 1; i <= n; i++) {
      p = parts[i]; gsub(/[ \t]/, "", p); sub(/:.*/, "", p)
      if (p != "") out[p] = 1
    }
  }
  FNR == NR { allowed[$1] = 1; queue[++qn] = $1; next }
  {
    pkg = $1; installed[pkg] = 1; deps[pkg] = $5
    if ($2 == "yes" || $3 == "required") { allowed[pkg] = 1; queue[++qn] = pkg }
    delete prov; names($4, prov)
    for (v in prov) providers[v] = providers[v] " " pkg
  }
  END {
    for (qi = 1; qi <= qn; qi++) {
      delete d; names(deps[queue[qi]], d)
      for (p in d) {
        cand[1] = p; nc = 1
        if (p in providers) { m = split(providers[p], pr, " "); for (j = 1; j <= m; j++) cand[++nc] = pr[j] }
        for (j = 1; j <= nc; j++) {
          c = cand[j]
          if ((c in installed) && !(c in allowed)) { allowed[c] = 1; queue[++qn] = c }
        }
      }
    }
    for (p in allowed) print p
  }' "$work/seeds" "$work/installed" | sort -u > "$work/allowed"

# ---- what is used -------------------------------------------------------------

: > "$work/used"
# Headers and other inputs the build read.
if [ -f "$build/build.ninja" ]; then
  ninja -C "$build" -t deps 2>/dev/null | awk '/^    \// { print $1 " build" }' >> "$work/used"
fi
# Tools.
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
for tool in "$compiler" cmake ninja gnuplot sh; do
  [ -n "$tool" ] || continue
  path=$(command -v "$tool" 2>/dev/null || true)
  [ -n "$path" ] && echo "$path tool" >> "$work/used"
done
# Shared objects loaded by each command.
mkdir -p "$work/ld"
run=0
while [ $# -gt 0 ]; do
  [ "$1" = "--" ] || usage
  shift
  cmd=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
  [ ${#cmd[@]} -gt 0 ] || usage
  run=$((run + 1))
  echo "check-packages: running ${cmd[*]}" >&2
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/ld/run$run" "${cmd[@]}" > "$work/run$run.out" 2>&1 ||
    { cat "$work/run$run.out" >&2; echo "check-packages: '${cmd[*]}' failed" >&2; exit 1; }
done
cat "$work"/ld/run* 2>/dev/null | sed -n 's/^ *[0-9]*:[[:space:]]*calling init: //p' | sort -u |
  awk '{ print $0 " loaded" }' >> "$work/used"

# ---- which package each file comes from --------------------------------------

# dpkg knows a file by the path its package installed it at: each file is
# looked up as used, by its real path, and on the other side of the /usr
# merge, all in one query.
sort -u "$work/used" | while read -r file how; do
  real=$(readlink -f "$file" 2>/dev/null || echo "$file")
  case $real in "$top"/*|"$build"/*) continue ;; esac
  for p in "$file" "$real"; do
    case $p in /usr/*) alt=${p#/usr} ;; *) alt=/usr$p ;; esac
    printf '%s\t%s\t%s\n' "$file" "$how" "$p"
    printf '%s\t%s\t%s\n' "$file" "$how" "$alt"
  done
done > "$work/candidates"
cut -f3 "$work/candidates" | sort -u > "$work/paths"
: > "$work/owners"
if [ -s "$work/paths" ]; then
  xargs -d '\n' dpkg-query -S < "$work/paths" 2>/dev/null | grep -v '^diversion by' |
    sed -n 's/^\([^:]*\)\(:[^ ,]*\)\{0,1\}\(, [^:]*\)\{0,1\}: \(\/.*\)$/\4\t\1/p' > "$work/owners" || true
fi
awk -F'\t' '
  FILENAME == ARGV[1] { allowed[$1] = 1; next }
  FILENAME == ARGV[2] { if (!($1 in owner)) owner[$1] = $2; next }
  {
    key = $1 "\t" $2
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    if (($3 in owner) && !(key in pkg)) pkg[key] = owner[$3]
  }
  END {
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, "\t")
      if (!(k in pkg)) {
        print "check-packages: " f[1] " (" f[2] ") comes from no Debian package; a fresh machine will not have it"
      } else if (!(pkg[k] in allowed)) {
        print "check-packages: " f[1] " (" f[2] ") comes from package " pkg[k] ", which scripts/bootstrap.sh does not install (nor anything it depends on)"
      }
    }
  }' "$work/allowed" "$work/owners" "$work/candidates" > "$work/problems"

if [ -s "$work/problems" ]; then
  cat "$work/problems" >&2
  exit 1
fi
echo "check-packages: every header, tool and shared object used ($(cut -f1 "$work/candidates" | sort -u | wc -l) files) comes from scripts/bootstrap.sh's packages, what they depend on, or the base system"
