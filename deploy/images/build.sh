#!/usr/bin/env bash
# Builds elect's container images from Debian packages alone, so it works
# where no container registry can be reached:
#   elect-base:bookworm  a debootstrapped Debian bookworm root with
#                        etcd-server, etcd-client, zookeeper and a headless
#                        JRE, imported with `docker import`;
#   elect:latest         elect-base plus the elect binary, its man pages
#                        and its bash completions;
#   elect-etcd:<version> elect-base with another etcd release's own etcd,
#                        etcdctl and etcdutl in /usr/local/bin, ahead of
#                        Debian's on the PATH: `build.sh etcd DIR` from the
#                        binaries in DIR (deploy/fetch-etcd.sh puts etcd
#                        3.5.1's in target/tools/etcd-3.5.1), for labs run
#                        with ELECT_ETCD_BIN=DIR.
# Idempotent: the base image is built once (ELECT_REBUILD_BASE=1 forces
# it); the elect image is rebuilt from the current binary every time, a
# release build unless ELECT_IMAGE_PROFILE=dev, or the binary named by
# ELECT_IMAGE_BINARY (what the test suite uses, to share its build).
# `build.sh base` builds the base image alone (the
# test suite does it while it compiles). Prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/../.."

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=elect-base:bookworm
PACKAGES=etcd-server,etcd-client,zookeeper,default-jre-headless,iproute2,procps,ca-certificates
started=$(date +%s)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

docker info >/dev/null 2>&1 || { echo "build.sh: the Docker engine is not usable" >&2; exit 1; }

if [ "${ELECT_REBUILD_BASE:-0}" = 1 ] || ! docker image inspect "$BASE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  root=$(mktemp -d /tmp/elect-rootfs.XXXXXX)
  trap 'as_root rm -rf "$root"' EXIT
  echo "debootstrap bookworm ($PACKAGES) from $MIRROR"
  as_root debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" >/dev/null
  as_root chroot "$root" apt-get clean
  as_root rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  as_root tar -C "$root" -c . | docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' - "$BASE" >/dev/null
  echo "built $BASE"
fi
if [ "${1:-}" = base ]; then
  echo "base image ready in $(( $(date +%s) - started ))s"
  exit 0
fi
if [ "${1:-}" = etcd ]; then
  bin=${2:?build.sh etcd DIR: the directory holding etcd and etcdctl}
  version=$("$bin/etcd" --version | sed -n 's/^etcd Version: //p')
  [ -n "$version" ] || { echo "build.sh: $bin/etcd does not say its version" >&2; exit 1; }
  context=$(mktemp -d /tmp/elect-etcd-image.XXXXXX)
  trap 'rm -rf "$context"' EXIT
  for program in etcd etcdctl etcdutl; do
    [ -x "$bin/$program" ] && cp "$bin/$program" "$context/"
  done
  {
    echo "FROM $BASE"
    echo "COPY etcd* /usr/local/bin/"
  } > "$context/Dockerfile"
  docker build -q -t "elect-etcd:$version" "$context" >/dev/null
  # Read whole (a `| grep -q` could fail the pipeline by SIGPIPE).
  said=$(docker run --rm --entrypoint etcd "elect-etcd:$version" --version)
  [[ "$said" == *"etcd Version: $version"* ]] || { echo "build.sh: the image's etcd says: $said" >&2; exit 1; }
  echo "built elect-etcd:$version in $(( $(date +%s) - started ))s"
  exit 0
fi

# The binary: ELECT_IMAGE_BINARY names one already built (the test suite
# passes the one its own build left in target/debug: a build here, without
# the dev-dependencies, would unify features differently and compile elect
# and a dozen dependencies once more); otherwise it is built here.
binary=${ELECT_IMAGE_BINARY:-}
if [ -z "$binary" ]; then
  profile=${ELECT_IMAGE_PROFILE:-release}
  cargo build --profile "$profile" --locked --bin elect
  binary=target/$([ "$profile" = dev ] && echo debug || echo "$profile")/elect
fi
[ -x "$binary" ] || { echo "build.sh: no elect binary at $binary" >&2; exit 1; }
context=$(mktemp -d /tmp/elect-image.XXXXXX)
cp "$binary" "$context/elect"
# Its man pages and bash completions, generated from its own parser.
"$context/elect" man --out "$context/man1" >/dev/null
"$context/elect" completions bash >"$context/elect.bash"
cat > "$context/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY elect /usr/local/bin/elect
COPY man1/ /usr/local/share/man/man1/
COPY elect.bash /usr/share/bash-completion/completions/elect
ENTRYPOINT ["/usr/local/bin/elect"]
DOCKERFILE
docker build -q -t elect:latest "$context" >/dev/null
rm -rf "$context"
echo "built elect:latest"
echo "images ready in $(( $(date +%s) - started ))s"
