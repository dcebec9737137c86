# doc_snippets.sh ROOT DOC: checks that every code block of DOC (a path
# relative to ROOT) that quotes a file of the tree is that file, byte for
# byte, so that a page cannot show code the build no longer compiles. Run it
# with sh; ctest runs it on docs/api.md, README.md,
# docs/policies/writing-a-policy.md and examples/net/README.md
# (tests/CMakeLists.txt).
#
# The marker: a block that quotes a file is preceded, on the line right
# above its opening fence, by an HTML comment naming the file from ROOT,
#
#   <!-- examples/api/latch.cpp -->
#   ```cpp
#   ...the whole file...
#   ```
#
# which Markdown renders as nothing. Blocks without a marker are prose and
# are not checked. It fails, naming the line of DOC and the file, when a
# block differs from its file (the difference follows, as `diff -u FILE
# BLOCK`), when a marker names a file that does not exist, when a marker is
# not followed by a fenced block, or when a block is left unclosed; and when
# DOC has no marked block at all, so that losing the markers cannot make it
# pass.
#
# A block may quote a part of a file instead: a region, marked in the file
# by a line `// [snippet NAME]` before it and a line `// [end NAME]` after
# it (the marker lines themselves are not part of it), and named in DOC by
# FILE#NAME:
#
#   <!-- tests/test_writing_a_policy.cpp#policy -->
#
# The block must then be the region, byte for byte; it also fails when the
# file marks no region NAME, marks it more than once, or does not close it.
root=$1
doc=$2
if [ -z "$root" ] || [ -z "$doc" ] || [ ! -f "$root/$doc" ]; then
  echo "usage: sh doc_snippets.sh ROOT DOC (DOC a file under ROOT)" >&2
  exit 2
fi
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
trap 'exit 143' INT TERM

# Split DOC: block N goes to $work/N, and $work/index gets "N LINE FILE",
# LINE being the marker's line. Problems with the markup itself go to
# $work/errors.
awk -v work="$work" -v doc="$doc" '
  function fail(msg) { print doc ":" NR ": " msg >> (work "/errors") }
  inside {
    if ($0 ~ /^```[ \t]*$/) { inside = 0; close(out); next }
    print > out
    next
  }
  pending != "" {
    if ($0 ~ /^```/) {
      n++
      out = work "/" n
      printf "" > out
      print n, marker_line, pending >> (work "/index")
      inside = 1
      open_block = pending
    } else {
      fail("the marker for " pending " is not followed by a fenced block")
    }
    pending = ""
    next
  }
  /^<!-- [^ ]+ -->[ \t]*$/ {
    pending = $2
    marker_line = NR
    next
  }
  END {
    if (inside) fail("the block of " open_block " is not closed")
    if (pending != "") fail("the marker for " pending " is not followed by a fenced block")
  }
' "$root/$doc" || exit 99

status=0
if [ -f "$work/errors" ]; then
  cat "$work/errors"
  status=1
fi
# region FILE NAME OUT: writes the lines of FILE between its `// [snippet
# NAME]` and `// [end NAME]` lines to OUT (leading and trailing blanks
# around a marker are allowed); prints what is wrong and fails when FILE
# does not mark exactly one closed region NAME.
region() {
  awk -v name="$2" -v out="$3" '
    BEGIN { printf "" > out }
    { line = $0; sub(/^[ \t]+/, "", line); sub(/[ \t]+$/, "", line) }
    line == "// [snippet " name "]" { starts++; if (starts == 1) inside = 1; next }
    line == "// [end " name "]" { if (inside) { inside = 0; ends++ } next }
    inside { print > out }
    END {
      if (starts == 0) { print "marks no region " name " (no // [snippet " name "] line)"; exit 1 }
      if (starts > 1) { print "marks the region " name " more than once"; exit 1 }
      if (ends == 0) { print "does not close the region " name " (no // [end " name "] line after its start)"; exit 1 }
    }
  ' "$1"
}

checked=0
if [ -f "$work/index" ]; then
  while read -r n line file; do
    path=${file%%#*}
    if [ ! -f "$root/$path" ]; then
      echo "$doc:$line: the block names $path, which does not exist"
      status=1
    elif [ "$path" = "$file" ]; then
      if ! cmp -s "$root/$file" "$work/$n"; then
        echo "$doc:$line: the block of $file differs from the file:"
        diff -u "$root/$file" "$work/$n" | sed '1,2d'
        status=1
      fi
    else
      name=${file#*#}
      if ! problem=$(region "$root/$path" "$name" "$work/$n.region"); then
        echo "$doc:$line: the block names $file, but $path $problem"
        status=1
      elif ! cmp -s "$work/$n.region" "$work/$n"; then
        echo "$doc:$line: the block of $file differs from that region of the file:"
        diff -u "$work/$n.region" "$work/$n" | sed '1,2d'
        status=1
      fi
    fi
    checked=$((checked + 1))
  done < "$work/index"
fi
if [ "$checked" -eq 0 ]; then
  echo "$doc: no marked block (<!-- FILE --> on the line above a fence); nothing was checked"
  exit 1
fi
if [ "$status" -eq 0 ]; then
  echo "$doc: $checked blocks, each the same as its file"
fi
exit $status
