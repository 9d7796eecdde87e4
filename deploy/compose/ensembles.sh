#!/usr/bin/env bash
# Brings the containerized ensembles of ensembles.yml up (waiting until
# every member is healthy) or down (no container, network or volume left).
#   deploy/compose/ensembles.sh up|down
set -euo pipefail
cd "$(dirname "$0")"
PROJECT=${ELECT_COMPOSE_PROJECT:-elect-ensembles}
. ./lib.sh

case "${1:-}" in
  up)
    require_images elect-base:bookworm
    started=$(date +%s)
    compose ensembles.yml -- up -d >/dev/null
    # shellcheck disable=SC2046
    wait_healthy 120 $(compose ensembles.yml -- ps -q)
    echo "etcd and ZooKeeper ensembles healthy in $(( $(date +%s) - started ))s (project $PROJECT)"
    ;;
  down)
    compose ensembles.yml -- down -v --remove-orphans --timeout 5 >/dev/null 2>&1
    echo "ensembles removed (project $PROJECT)"
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
