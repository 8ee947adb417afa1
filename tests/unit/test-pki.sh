#!/bin/bash
# Makes a throwaway PKI for hotmigd's TLS tests with openssl, in DIR:
#   ca.pem ca-key.pem                the test CA
#   server.pem server-key.pem        signed by it, for 127.0.0.1 / localhost (serverAuth)
#   client.pem client-key.pem        signed by it (clientAuth)
#   self.pem self-key.pem            a self-signed client certificate
#   other-ca.pem                     another CA, and other-client.pem other-client-key.pem
#                                    (clientAuth) signed by it
#   expired.pem expired-key.pem      signed by the test CA, expired (clientAuth)
#   stranger.pem stranger-key.pem    signed by the test CA, an identity no configuration names
#   peer2.pem peer2-key.pem          signed by the test CA, DNS name node02.test (a second host)
#   operator.pem operator-key.pem    signed by the test CA, common name hotmig-operator
# EC P-256 keys: fast to make. Usage: test-pki.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
log=$dir/openssl.log
: >"$log"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>>"$log"; }

# ca NAME: a self-signed CA certificate NAME.pem with key NAME-key.pem
ca() {
    key "$1-key.pem"
    openssl req -x509 -new -key "$1-key.pem" -out "$1.pem" -days 30 -subj "/O=hotmig test/CN=$1" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>>"$log"
}

# cert NAME CA CN USAGE [SAN] [DAYS]: NAME.pem with key NAME-key.pem, signed by CA.
cert() {
    local name=$1 ca=$2 cn=$3 usage=$4 san=${5:-} days=${6:-30} ext
    key "$name-key.pem"
    openssl req -new -key "$name-key.pem" -out "$name.csr" -subj "/O=hotmig test/CN=$cn" 2>>"$log"
    ext=$(mktemp)
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        [ -z "$san" ] || echo "subjectAltName=$san"
    } >"$ext"
    if [ "$days" -lt 0 ]; then
        # openssl x509 cannot back-date: sign with 'ca' and explicit dates instead.
        openssl ca -batch -config <(printf '[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\nnew_certs_dir=%s\nserial=%s/serial\ndefault_md=sha256\npolicy=p\ncopy_extensions=copy\n[p]\nO=optional\nCN=supplied\n' "$dir" "$dir" "$dir") \
            -cert "$ca.pem" -keyfile "$ca-key.pem" -in "$name.csr" -out "$name.pem" \
            -startdate 20200101000000Z -enddate 20200201000000Z -extfile "$ext" -notext 2>>"$log"
    else
        openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca-key.pem" -CAcreateserial \
            -out "$name.pem" -days "$days" -extfile "$ext" 2>>"$log"
    fi
    rm -f "$ext" "$name.csr"
}

: >index.txt
echo 1000 >serial
ca ca
ca other-ca
cert server ca localhost serverAuth "IP:127.0.0.1,DNS:localhost"
cert client ca hotmig-test-client clientAuth
cert other-client other-ca hotmig-other-client clientAuth
cert expired ca hotmig-expired-client clientAuth "" -1
cert stranger ca hotmig-stranger clientAuth
cert peer2 ca node02 clientAuth "DNS:node02.test"
cert operator ca hotmig-operator clientAuth
key self-key.pem
openssl req -x509 -new -key self-key.pem -out self.pem -days 30 -subj "/O=hotmig test/CN=self-signed" \
    -addext "extendedKeyUsage=clientAuth" 2>>"$log"
