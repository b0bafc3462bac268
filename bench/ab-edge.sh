#!/bin/bash
# bench/ab.sh's method for the Rosetta and Blockbook paths: two builds of the
# gateway against each other in one run.
#   bench/ab-edge.sh OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]
# Builds one manifest (a Rosetta chain and a Blockbook chain) with each
# checkout's own generator; both gateways run at once pinned to core 0 and are
# loaded in turn; a node:http upstream answering a fixed JSON body and wrk run
# on core 1. Blockbook: GET /bitcoin/v2/block/1?pageSize=10; Rosetta: POST
# /cardano-preprod/network/status; key in X-API-Key. Prints req/s, p99 and the
# new/old ratio per round. Needs ../shared/bench (post.lua), wrk and taskset.
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); R=${3:-8}
HERE=$(dirname "$(realpath "$0")")
BENCH_DIR=${BENCH_DIR:-$HERE/../../shared/bench}
KEY=bench-key-5f2c9a7e-0123456789
W=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT
cat >"$W/gateway.yaml" <<'YAML'
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "${PORT}" }
  explorer: { host: 127.0.0.1, port: "${EPORT}" }
keys: ./keys.yaml
health: { intervalMs: 5000, timeoutMs: 2000 }
chains:
  - { path: cardano-preprod, interface: rosetta, listener: rpc, network: preprod, upstreams: ["${UPSTREAM_URL}"] }
  - { path: bitcoin, interface: blockbook, listener: explorer, upstreams: ["${UPSTREAM_URL}api"] }
YAML
printf 'keys:\n  - id: bench\n    sha256: "%s"\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" >"$W/keys.yaml"
(cd "$W" && node "$OLD/bin/gateway.mjs" build gateway.yaml --out old.mjs && node "$NEW/bin/gateway.mjs" build gateway.yaml --out new.mjs) >/dev/null
cat >"$W/up.mjs" <<'JS'
import { createServer } from 'node:http';
const body = Buffer.from(JSON.stringify({ current_block_identifier: { index: 1000, hash: 'ab'.repeat(32) }, current_block_timestamp: 1700000000000, genesis_block_identifier: { index: 0, hash: 'cd'.repeat(32) }, peers: [] }));
createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }); res.end(body); }); }).listen(18600, '127.0.0.1');
JS
cat >"$W/get.lua" <<LUA
wrk.method = "GET"
wrk.headers["X-API-Key"] = "$KEY"
function done(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p99_us=%.0f err_status=%d\n", summary.requests / (summary.duration / 1e6), latency:percentile(99), summary.errors.status))
end
LUA
echo '{"network_identifier":{"blockchain":"cardano","network":"preprod"},"metadata":{}}' >"$W/ros.json"
cd "$W"
taskset -c 1 node up.mjs & pids+=($!)
UPSTREAM_URL=http://127.0.0.1:18600/ PORT=18601 EPORT=18611 taskset -c 0 node --no-memory-reducer old.mjs >/dev/null 2>&1 & pids+=($!)
UPSTREAM_URL=http://127.0.0.1:18600/ PORT=18602 EPORT=18612 taskset -c 0 node --no-memory-reducer new.mjs >/dev/null 2>&1 & pids+=($!)
for p in 18600 18601 18602 18611 18612; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
pick() { grep RESULT | sed 's/.*rps=\([0-9.]*\).*p99_us=\([0-9]*\).*err_status=\([0-9]*\).*/\1 \2 \3/'; }
bb() { taskset -c 1 wrk -t1 -c50 -d"$2"s -s get.lua "http://127.0.0.1:$1/bitcoin/v2/block/1?pageSize=10" | pick; }
ro() { BENCH_BODY_FILE=ros.json BENCH_API_KEY=$KEY taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$BENCH_DIR/post.lua" "http://127.0.0.1:$1/cardano-preprod/network/status" | pick; }
bb 18611 6 >/dev/null; bb 18612 6 >/dev/null; ro 18601 6 >/dev/null; ro 18602 6 >/dev/null
for what in bb:18611:18612 ro:18601:18602; do
  IFS=: read -r f po pn <<<"$what"
  for i in $(seq "$R"); do
    if [ $((i % 2)) = 1 ]; then o=$($f "$po" 5); n=$($f "$pn" 5); else n=$($f "$pn" 5); o=$($f "$po" 5); fi
    echo "$([ "$f" = bb ] && echo blockbook || echo rosetta) round $i old $o new $n ratio $(awk -v a="${n%% *}" -v b="${o%% *}" 'BEGIN{printf "%.3f", a/b}')"
  done
done
