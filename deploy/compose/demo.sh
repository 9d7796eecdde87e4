#!/usr/bin/env bash
# The compose demo: etcd and ZooKeeper ensembles plus three apps that each
# run their work under `elect run`.
#   deploy/compose/demo.sh up        start, wait until one app leads
#   deploy/compose/demo.sh leader    which app leads now
#   deploy/compose/demo.sh failover  SIGKILL the leading app, time the successor
#   deploy/compose/demo.sh down      remove everything
# ELECT_DEMO_BACKEND=zk uses the ZooKeeper ensemble instead of etcd.
set -euo pipefail
cd "$(dirname "$0")"
PROJECT=${ELECT_COMPOSE_PROJECT:-elect-demo}
. ./lib.sh
if [ "${ELECT_DEMO_BACKEND:-etcd}" = zk ]; then
  export ELECT_DEMO_ENDPOINTS=zk1:2181,zk2:2181,zk3:2181
fi
FILES=(ensembles.yml demo.yml ${ELECT_COMPOSE_EXTRA:-})

# The leading app's id, asked with `elect leader` in the first app
# container that answers (it exits 3 while nobody leads).
leader() {
  local app
  for app in app1 app2 app3; do
    compose "${FILES[@]}" -- exec -T "$app" elect leader 2>/dev/null && return 0
  done
  return 1
}

wait_leader() {
  local limit=$1 started=$(date +%s) who
  until who=$(leader) && [ -n "$who" ] && [ "$who" != "${2:-}" ]; do
    if [ $(( $(date +%s) - started )) -gt "$limit" ]; then
      echo "no new leader after ${limit}s" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "$who"
}

case "${1:-}" in
  up)
    require_images elect-base:bookworm "${ELECT_IMAGE:-elect:latest}"
    started=$(date +%s)
    compose "${FILES[@]}" -- up -d >/dev/null
    # shellcheck disable=SC2046
    wait_healthy 120 $(compose "${FILES[@]}" -- ps -q)
    who=$(wait_leader 60)
    echo "demo up in $(( $(date +%s) - started ))s: $who leads (backend ${ELECT_DEMO_BACKEND:-etcd})"
    echo "watch it:  cd deploy/compose && docker-compose -p $PROJECT -f ensembles.yml -f demo.yml logs -f app1 app2 app3"
    ;;
  leader)
    leader
    ;;
  failover)
    old=$(wait_leader 30)
    started=$(date +%s%N)
    docker kill "$(compose "${FILES[@]}" -- ps -q "$old")" >/dev/null
    new=$(wait_leader 60 "$old")
    echo "$old killed; $new leads after $(( ($(date +%s%N) - started) / 1000000 )) ms"
    compose "${FILES[@]}" -- start "$old" >/dev/null
    ;;
  down)
    compose "${FILES[@]}" -- down -v --remove-orphans --timeout 5 >/dev/null 2>&1
    echo "demo removed (project $PROJECT)"
    ;;
  *)
    echo "usage: $0 up|leader|failover|down" >&2
    exit 2
    ;;
esac
