#!/usr/bin/env bash
# Proves the README's first command needs no protoc: checks elect in a
# private mount namespace where the machine's protoc and protobuf headers
# are hidden (needs root, for unshare). etcd-client is the one crate whose
# build script compiles protobuf definitions; its build is removed first,
# so that the check runs that script again whatever an earlier build left
# (in CI, on a clean clone, nothing is left anyway). Everything else the
# check builds lands in the repository's own target directory, where the
# clippy run that follows in deploy/test.sh uses it instead of building
# it again. Run by deploy/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "fresh-build: hiding protoc needs root (unshare --mount); skipped" >&2
  exit 0
fi
cargo clean --quiet -p etcd-client
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
  started=$(date +%s)
  cargo check --locked --quiet --bin elect
  echo "fresh-build: checked without protoc in $(( $(date +%s) - started ))s"
'
