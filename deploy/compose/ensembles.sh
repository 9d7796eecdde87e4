#!/usr/bin/env bash
# Brings the containerized ensembles of ensembles.yml up (waiting until
# every member is healthy) or down (no container, network or volume left).
#   deploy/compose/ensembles.sh up|down
# Works with the `docker compose` plugin or Debian's docker-compose.
set -euo pipefail
cd "$(dirname "$0")"
PROJECT=${ELECT_COMPOSE_PROJECT:-elect-ensembles}

compose() {
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$PROJECT" -f ensembles.yml "$@"
  else
    docker-compose -p "$PROJECT" -f ensembles.yml "$@"
  fi
}

case "${1:-}" in
  up)
    docker image inspect elect:latest >/dev/null 2>&1 || ../images/build.sh
    compose up -d >/dev/null
    started=$(date +%s)
    for c in $(compose ps -q); do
      until [ "$(docker inspect -f '{{.State.Health.Status}}' "$c")" = healthy ]; do
        if [ $(( $(date +%s) - started )) -gt 120 ]; then
          echo "ensembles.sh: $(docker inspect -f '{{.Name}}' "$c") is not healthy after 120s" >&2
          exit 1
        fi
        sleep 0.5
      done
    done
    echo "etcd and ZooKeeper ensembles healthy in $(( $(date +%s) - started ))s (project $PROJECT)"
    ;;
  down)
    compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1
    echo "ensembles removed (project $PROJECT)"
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
