#!/usr/bin/env bash
# Gives an app its own etcd user, whose role may read and write only
# under `NAME/` (its elections and the markers elect writes beside their
# keys), and turns etcd's auth on, with a root user, if it is not on yet.
#
#   export ETCDCTL_ENDPOINTS=https://etcd.default.svc:2379
#   export ETCDCTL_CACERT=certs/ca.crt ETCDCTL_CERT=certs/tls.crt ETCDCTL_KEY=certs/tls.key
#   deploy/kubernetes/etcd-users.sh my-app
#
# Asks for root's password and NAME's (or reads ROOT_PASSWORD and
# USER_PASSWORD). Where auth is on already, set ETCDCTL_USER=root (etcdctl
# asks for its password) or ETCDCTL_USER=root:PASSWORD: only NAME is added.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 NAME (the app's user, role and key prefix)" >&2
  exit 2
fi
name=$1
export ETCDCTL_API=3
ask() {
  if [ -z "${!1:-}" ]; then
    read -rsp "$2: " "$1"
    echo >&2
  fi
}
first=false
if [ -z "${ETCDCTL_USER:-}" ]; then
  ask ROOT_PASSWORD "a password for etcd's root user"
  etcdctl user add root --new-user-password "$ROOT_PASSWORD" >/dev/null
  first=true
fi
ask USER_PASSWORD "a password for the etcd user $name"
etcdctl user add "$name" --new-user-password "$USER_PASSWORD" >/dev/null
etcdctl role add "$name" >/dev/null
etcdctl role grant-permission "$name" readwrite --prefix=true "$name/" >/dev/null
etcdctl user grant-role "$name" "$name" >/dev/null
if $first; then
  etcdctl auth enable >/dev/null
fi
echo "etcd user $name: readwrite under $name/; auth is on"
