#!/usr/bin/env bash
# Makes the certificates the Kubernetes manifests' etcd expects, with
# openssl: a CA, etcd's serving certificate for the names clients use,
# and a client certificate for the sidecar, all signed by that CA.
#
#   deploy/kubernetes/etcd-certificates.sh DIR NAME...
#
# e.g. `... certs etcd.default.svc etcd.default.svc.cluster.local`. Writes
# into DIR (refusing to overwrite a CA already there):
#   ca.crt, ca.key          the CA (keep ca.key off the cluster)
#   server.crt, server.key  etcd's --cert-file and --key-file
#   tls.crt, tls.key        the sidecar's --cert and --key (CN my-app)
# A NAME that is an IPv4 address goes into the certificate as one.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME... (the names clients reach etcd by)" >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir"
cd "$dir"
if [ -e ca.key ]; then
  echo "$dir/ca.key exists: not overwritten (remove the directory's files first)" >&2
  exit 1
fi
names=""
for name in "$@"; do
  case $name in
    *[!0-9.]*) names+="DNS:$name," ;;
    *) names+="IP:$name," ;;
  esac
done
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# sign NAME SUBJECT EXTENSIONS: NAME.crt for NAME.key, signed by the CA.
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 825 -sha256 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm "$1.csr" "$1.ext"
}
key ca.key
openssl req -x509 -new -key ca.key -subj /CN=etcd-ca -days 3650 -sha256 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
  -out ca.crt
sign server /CN=etcd "subjectAltName=${names%,}
extendedKeyUsage=serverAuth,clientAuth
keyUsage=critical,digitalSignature"
sign tls /CN=my-app "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"
rm -f ca.srl
chmod 0644 ca.crt server.crt tls.crt
echo "wrote $dir: ca.crt ca.key server.crt server.key tls.crt tls.key"
