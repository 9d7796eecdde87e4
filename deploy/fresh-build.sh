#!/usr/bin/env bash
# Proves the README's first command needs no protoc: checks elect from a
# clean clone of this repository, in a private mount namespace where the
# machine's protoc and protobuf headers are hidden (needs root, for
# unshare). A check runs every build script, etcd-client's compilation of
# the protobuf definitions included, without the code generation the
# suite's builds do anyway. Run by deploy/test.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/elect"
# Run by hand, uncommitted changes to tracked files are tested too (new
# files only once `git add`ed).
git -C "$repo" diff HEAD | git -C "$work/elect" apply --allow-empty
if [ "$(id -u)" != 0 ]; then
  echo "fresh-build: hiding protoc needs root (unshare --mount); skipped" >&2
  exit 0
fi
unset PROTOC PROTOC_INCLUDE
unshare --mount --propagation private bash -euo pipefail -c '
  hide() { if [ -e "$1" ]; then mount --bind "$2" "$1"; fi; }
  empty=$(mktemp -d)
  hide /usr/bin/protoc /dev/null
  hide /usr/include/google "$empty"
  if command -v protoc >/dev/null && protoc --version >/dev/null 2>&1; then
    echo "fresh-build: protoc is still visible" >&2
    exit 1
  fi
  cd "$1"
  started=$(date +%s)
  cargo check --locked --quiet --bin elect
  echo "fresh-build: checked without protoc in $(( $(date +%s) - started ))s"
' fresh-build "$work/elect"
