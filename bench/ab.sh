#!/bin/bash
# Two builds of the gateway against each other, on one host in one run:
#   bench/ab.sh OLD_CHECKOUT NEW_CHECKOUT [small|big|batch] [ROUNDS]
# Each checkout must have run `npm run bench` once (dist/bench-gateway.mjs and
# .tmp/bench/keys.yaml). Both gateways run at once, pinned to core 0 and loaded
# in turn; a node:http upstream answering the harness's fixture and wrk run on
# core 1. After 8 s of warm-up each, rounds of 5 s alternate which goes first.
# Prints req/s and p99 (us) per round. Needs ../shared/bench, wrk and taskset.
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); S=${3:-small}; R=${4:-8}
HERE=$(dirname "$(realpath "$0")")
BENCH_DIR=${BENCH_DIR:-$HERE/../../shared/bench}
KEY=${API_KEY:-bench-key-5f2c9a7e-0123456789}
FX=$(mktemp -d)
node "$BENCH_DIR/gen-fixtures.mjs" "$FX" >/dev/null 2>&1
cat >"$FX/up.mjs" <<'JS'
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
const body = readFileSync(process.argv[2]);
createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }); res.end(body); }); }).listen(Number(process.argv[3]), '127.0.0.1');
JS
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$FX"' EXIT
taskset -c 1 node "$FX/up.mjs" "$FX/$S.resp.json" 18600 & pids+=($!)
start() { (cd "$1" && GATEWAY_KEYS_FILE="$1/.tmp/bench/keys.yaml" UPSTREAM_URL=http://127.0.0.1:18600/ PORT=$2 HOST=127.0.0.1 exec taskset -c 0 node --no-memory-reducer dist/bench-gateway.mjs >/dev/null 2>&1) & pids+=($!); }
start "$OLD" 18601
start "$NEW" 18602
for p in 18600 18601 18602; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
w() { BENCH_BODY_FILE="$FX/$S.req.json" BENCH_API_KEY=$KEY taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$BENCH_DIR/post.lua" "http://127.0.0.1:$1/eth" | grep RESULT | sed 's/.*rps=\([0-9.]*\).*p99_us=\([0-9]*\).*/\1 \2/'; }
w 18601 8 >/dev/null; w 18602 8 >/dev/null
for i in $(seq "$R"); do
  if [ $((i % 2)) = 1 ]; then o=$(w 18601 5); n=$(w 18602 5); else n=$(w 18602 5); o=$(w 18601 5); fi
  echo "$S round $i old $o new $n ratio $(awk -v a="${n%% *}" -v b="${o%% *}" 'BEGIN{printf "%.3f", a/b}')"
done
