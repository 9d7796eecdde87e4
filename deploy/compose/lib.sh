# Shared by ensembles.sh and demo.sh: run compose with whichever tool is
# present (the `docker compose` plugin or Debian's docker-compose), and
# wait for health checks.

# compose <files...> -- <compose arguments...>
compose() {
  local files=()
  while [ "$1" != -- ]; do files+=(-f "$1"); shift; done
  shift
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$PROJECT" "${files[@]}" "$@"
  else
    docker-compose -p "$PROJECT" "${files[@]}" "$@"
  fi
}

# wait_healthy <seconds> <container ids...>: every container with a health
# check reports healthy, or exit 1 naming the one that did not.
wait_healthy() {
  local limit=$1 started c
  shift
  started=$(date +%s)
  for c in "$@"; do
    [ "$(docker inspect -f '{{if .State.Health}}yes{{end}}' "$c")" = yes ] || continue
    until [ "$(docker inspect -f '{{.State.Health.Status}}' "$c")" = healthy ]; do
      if [ $(( $(date +%s) - started )) -gt "$limit" ]; then
        echo "$(docker inspect -f '{{.Name}}' "$c") is not healthy after ${limit}s" >&2
        exit 1
      fi
      sleep 0.5
    done
  done
}

# require_images <image...>: builds them (deploy/images/build.sh) unless
# present; compose must never try to pull them.
require_images() {
  docker info >/dev/null 2>&1 || { echo "the Docker engine is not usable" >&2; exit 1; }
  local image
  for image in "$@"; do
    docker image inspect "$image" >/dev/null 2>&1 || ../images/build.sh
    docker image inspect "$image" >/dev/null 2>&1 || { echo "no image $image" >&2; exit 1; }
  done
}
