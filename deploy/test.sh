#!/usr/bin/env bash
# Runs elect's whole test suite against real etcd, installing what it needs
# first: Debian's etcd-server, etcd-client and protobuf-compiler (etcd-client
# builds its gRPC code with protoc), and cargo-nextest.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v etcd >/dev/null || missing+=(etcd-server)
command -v etcdctl >/dev/null || missing+=(etcd-client)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  as_root apt-get update -qq
  # Debian's package would start an etcd service where an init system runs;
  # the tests start their own members.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  as_root sh -c 'command -v systemctl >/dev/null && systemctl disable --now etcd 2>/dev/null || true'
fi
cargo nextest --version >/dev/null 2>&1 || cargo install --locked cargo-nextest

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo nextest run --locked "$@"
