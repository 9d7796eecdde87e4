#!/usr/bin/env bash
# Runs elect's whole test suite against real etcd and ZooKeeper, installing
# what it needs first from Debian: etcd-server, etcd-client,
# protobuf-compiler (etcd-client builds its gRPC code with protoc),
# zookeeper (run with the machine's Java), python3-kazoo and
# libcurator-recipes-java (the interop peers); then cargo-nextest.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v etcd >/dev/null || missing+=(etcd-server)
command -v etcdctl >/dev/null || missing+=(etcd-client)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v java >/dev/null || missing+=(default-jre-headless)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
/usr/bin/python3 -c 'import kazoo' 2>/dev/null || missing+=(python3-kazoo)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  as_root apt-get update -qq
  # Debian's package would start an etcd service where an init system runs;
  # the tests start their own members.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  as_root sh -c 'command -v systemctl >/dev/null && systemctl disable --now etcd zookeeper 2>/dev/null || true'
fi
cargo nextest --version >/dev/null 2>&1 || cargo install --locked cargo-nextest

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo nextest run --locked "$@"
