#!/bin/sh
# Security review 2026-12, finding 8 (docs/reviews/security-2026-12.md), run inside a network namespace the test
# created (`unshare -n`): the host's public IPv4, global IPv6 and a private address sit on `lo`, a
# service listens on [::]:$SERVICE_PORT (every address of the host), and a real
# `sluice start --config $DIR/sluice.yaml` listens on 127.0.0.1:$PROXY_PORT. Each attempt prints one
# line: `<case> <absolute-form status> <CONNECT status> <body>`. Takes DIR, BIN, NODE, PROXY_PORT and
# SERVICE_PORT from the environment; every process it starts is ended by its PID on exit.
set -eu

ip link set lo up
ip addr add 11.22.33.44/32 dev lo
ip addr add 10.9.8.7/32 dev lo
ip -6 addr add 2a01:4f8:1:2::44/128 dev lo nodad

PIDS=''
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

"$NODE" -e "require('node:http').createServer((q, s) => s.end('HOST-LOCAL-SERVICE')).listen($SERVICE_PORT, '::')" &
PIDS="$PIDS $!"
"$NODE" "$BIN" start --config "$DIR/sluice.yaml" >"$DIR/sluice.log" 2>&1 &
PIDS="$PIDS $!"

i=0
until curl -s -o /dev/null --noproxy '' -m 1 "http://127.0.0.1:$PROXY_PORT/" 2>/dev/null; do
  i=$((i + 1))
  if [ "$i" -ge 100 ]; then echo "sluice did not start:"; cat "$DIR/sluice.log"; exit 3; fi
  sleep 0.1
done
echo "addresses $(ip -o addr show lo | awk '{print $4}' | tr '\n' ' ')"
echo "control $(curl -s -m 3 --noproxy '' "http://[2a01:4f8:1:2::44]:$SERVICE_PORT/")"

# attempt CASE GRANT URL: absolute form, then CONNECT (curl -p), through the proxy as GRANT.
attempt() {
  proxy="http://$2:tok-$2@127.0.0.1:$PROXY_PORT"
  body=$(curl -s -m 5 --globoff --noproxy '' -o "$DIR/body" -w '%{http_code}' -x "$proxy" "$3" || true)
  tunnel=$(curl -s -m 5 --globoff --noproxy '' -p -o /dev/null -w '%{http_connect}' -x "$proxy" "$3" || true)
  echo "$1 $body $tunnel $(cat "$DIR/body" 2>/dev/null | head -c 40 | tr -d '\n')"
  rm -f "$DIR/body"
}

S=$SERVICE_PORT
attempt public-v4 pub "http://11.22.33.44:$S/"
attempt global-v6 pub "http://[2a01:4f8:1:2::44]:$S/"
attempt mapped pub "http://[::ffff:11.22.33.44]:$S/"
attempt nat64 pub "http://[64:ff9b::b16:212c]:$S/"
attempt 6to4 pub "http://[2002:b16:212c::1]:$S/"
attempt wildcard-aaaa wild "http://www.attacker.test:$S/"
attempt private-v4 priv "http://10.9.8.7:$S/"
attempt loopback-control pub "http://127.0.0.1:$S/"
attempt host-granted-v4 hostok "http://11.22.33.44:$S/"
attempt host-granted-v6 hostok "http://[2a01:4f8:1:2::44]:$S/"
attempt host-granted-loopback hostok "http://127.0.0.1:$S/"
