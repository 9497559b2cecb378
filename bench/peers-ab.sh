#!/usr/bin/env bash
# Two Sluice builds side by side in one run of the peers harness (../shared/peers/run.sh: the Node
# floor, Squid, tinyproxy, a C load generator, the proxy pinned to one core), each configured as
# sluice-realistic.sh configures Sluice (a token on every CONNECT, loopback granted, audit on): the
# way to measure a change against the commit before it in the same run.
#   bash bench/peers-ab.sh BEFORE_CHECKOUT AFTER_CHECKOUT [run.sh options]
#   e.g. git worktree add /tmp/before HEAD~1 && (cd /tmp/before && ln -s "$PWD/node_modules" . && npm run build)
#        bash bench/peers-ab.sh /tmp/before . --reps 3 --targets minimal-node,squid --tests bulk --bulk-streams 1
# The targets are named `before` and `sluice`. PEERS names the harness folder if it is elsewhere.
set -euo pipefail
before=$(cd "${1:?usage: peers-ab.sh BEFORE_CHECKOUT AFTER_CHECKOUT [run.sh options]}" && pwd)
after=$(cd "${2:?usage: peers-ab.sh BEFORE_CHECKOUT AFTER_CHECKOUT [run.sh options]}" && pwd)
shift 2
src=$(cd "${PEERS:-$(dirname "${BASH_SOURCE[0]}")/../../shared/peers}" && pwd)
work=$(mktemp -d /tmp/sluice-ab.XXXXXX)
cp -r "$src"/. "$work"/ && chmod -R u+w "$work"
bash "$work/setup.sh" >"$work/setup.log" 2>&1 || { tail -20 "$work/setup.log"; exit 1; }
token=bench-token-$RANDOM$RANDOM
sha=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
for n in a b; do
port=$([ $n = a ] && echo 18106 || echo 18105)
cat > "$work/sluice-$n.yaml" <<YAML
listeners:
  - name: bench
    listen: 127.0.0.1:$port
    identify: token
admin:
  listen: unix:$work/admin-$n.sock
state: $work/state-$n
grants:
  - id: bench
    tokenSha256: $sha
    unrestricted: true
    allowAddressClasses: [loopback]
YAML
done
export PXBENCH_PROXY_HEADER="Proxy-Authorization: Basic $(printf %s "bench:$token" | base64 -w0)"
bash "$work/run.sh" "$@" --out "$work/out" \
  --add "before@18106=node $before/bin/sluice.js start --config $work/sluice-a.yaml" \
  --add "sluice@18105=node $after/bin/sluice.js start --config $work/sluice-b.yaml"
echo "results: $work/out"
