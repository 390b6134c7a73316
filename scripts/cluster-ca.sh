#!/usr/bin/env bash
# Makes a private CA and a certificate from it for each name given, for TLS between a run's head and its nodes
# (`lessrt node` / `lessrt run --tls-cert DIR/NAME.pem --tls-key DIR/NAME.key --tls-ca DIR/ca.pem`).
#
#   scripts/cluster-ca.sh DIR NAME[=SAN,...] ...
#
# Each NAME gets DIR/NAME.pem and DIR/NAME.key (EC P-256, 30 days), usable both as a server (a node) and as a client
# (the head). Its subject alternative names are the SANs given (`n1=IP:10.0.0.5,DNS:n1.internal`), or IP:127.0.0.1
# and DNS:localhost; a node's certificate must name the address the head connects to. The CA is made once per DIR
# (DIR/ca.pem, DIR/ca.key): keep ca.key off the nodes. Needs the openssl command line.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 DIR NAME[=SAN,...] ..." >&2
    exit 2
fi
dir=$1
shift
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/ca.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj "/CN=lessrt cluster CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
for spec in "$@"; do
    name=${spec%%=*}
    sans="IP:127.0.0.1,DNS:localhost"
    if [ "$spec" != "$name" ]; then sans=${spec#*=}; fi
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
    printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
        "$sans" > "$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
        -out "$dir/$name.pem" -extfile "$dir/$name.ext" 2>/dev/null
    rm -f "$dir/$name.csr" "$dir/$name.ext"
    echo "$dir/$name.pem $dir/$name.key (CA: $dir/ca.pem)"
done
