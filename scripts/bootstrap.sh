#!/usr/bin/env bash
# bootstrap.sh: install the Debian 12 packages usched builds with, if missing.
# Safe to run repeatedly; does nothing when everything is present.
# `bootstrap.sh --list` prints the packages, one a line, and installs nothing
# (scripts/check-packages.sh reads it).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-context-dev libboost-dev libboost-fiber-dev
  libhwloc-dev hwloc
  liburing-dev
  libspdlog-dev libfmt-dev
  catch2
  libbenchmark-dev libtbb-dev
  gnuplot-nox python3
  wrk golang-go
)

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "bootstrap: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
