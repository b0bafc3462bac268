#!/bin/bash
# What checking parameters at the edge costs (issue 23): one gateway with two
# EVM chains in front of one upstream, /eth (validate: params) and /eth-off
# (validate: off), loaded in turn with the same call:
#   eth_getBalance  an address and a block tag
#   eth_call        a transaction object (to, data) and a block tag
# The gateway is pinned to core 0; the upstream (a node:http server answering
# one fixed JSON-RPC body) and wrk to core 1. After 8 s of warm-up on each,
# rounds of 5 s alternate which path goes first. Prints req/s and p99 (us)
# per round, and the median of params/off per call: the target is >= 0.9.
#   bench/validate.sh [ROUNDS]        (npm run bench runs it after the harness)
# Needs ../shared/bench (post.lua), wrk and taskset.
set -euo pipefail
R=${1:-6}
HERE=$(dirname "$(realpath "$0")")
ROOT=$(realpath "$HERE/..")
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
KEY=${API_KEY:-bench-key-5f2c9a7e-0123456789}
W=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT

cat >"$W/gateway.yaml" <<'YAML'
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "${PORT}" }
keys: ./keys.yaml
health: { intervalMs: 5000, timeoutMs: 2000 }
methodSets:
  evm: [eth_blockNumber, eth_getBalance, eth_call]
chains:
  - { path: eth, interface: evm-jsonrpc, listener: rpc, methods: evm, upstreams: ["${UPSTREAM_URL}"] }
  - { path: eth-off, interface: evm-jsonrpc, listener: rpc, methods: evm, validate: off, upstreams: ["${UPSTREAM_URL}"] }
YAML
printf 'keys:\n  - id: bench\n    sha256: "%s"\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" >"$W/keys.yaml"
(cd "$W" && node "$ROOT/bin/gateway.mjs" build gateway.yaml --out gateway.mjs) >/dev/null
echo '{"jsonrpc":"2.0","id":1,"result":"0x1bc16d674ec80000"}' >"$W/answer.json"
echo '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045","latest"]}' >"$W/eth_getBalance.json"
echo '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","data":"0x70a08231000000000000000000000000d8da6bf26964af9d7eed9e03e53415d37aa96045"},"latest"]}' >"$W/eth_call.json"
taskset -c 1 node "$HERE/fixed-upstream.mjs" "$W/answer.json" 18620 & pids+=($!)
(cd "$W" && GATEWAY_KEYS_FILE="$W/keys.yaml" UPSTREAM_URL=http://127.0.0.1:18620/ PORT=18621 exec taskset -c 0 node --no-memory-reducer gateway.mjs >/dev/null 2>&1) & pids+=($!)
for p in 18620 18621; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done

w() { # path body seconds
  BENCH_BODY_FILE="$W/$2.json" BENCH_API_KEY=$KEY taskset -c 1 wrk -t1 -c50 -d"$3"s -s "$BENCH_DIR/post.lua" "http://127.0.0.1:18621/$1" |
    grep RESULT | sed 's/.*rps=\([0-9.]*\).*p99_us=\([0-9]*\).*/\1 \2/'
}
# Every answer must be the upstream's: a refusal would make the checked path look fast.
for call in eth_getBalance eth_call; do
  for path in eth eth-off; do
    got=$(curl -s -H "x-api-key: $KEY" --data-binary "@$W/$call.json" "http://127.0.0.1:18621/$path")
    [ "$got" = "$(cat "$W/answer.json")" ] || { echo "validate.sh: /$path $call answered $got" >&2; exit 1; }
  done
done
for call in eth_getBalance eth_call; do
  w eth "$call" 8 >/dev/null; w eth-off "$call" 8 >/dev/null
  ratios=()
  for i in $(seq "$R"); do
    if [ $((i % 2)) = 1 ]; then v=$(w eth "$call" 5); o=$(w eth-off "$call" 5); else o=$(w eth-off "$call" 5); v=$(w eth "$call" 5); fi
    r=$(awk -v a="${v%% *}" -v b="${o%% *}" 'BEGIN{printf "%.3f", a/b}')
    ratios+=("$r")
    echo "validate $call round $i params $v off $o ratio $r"
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  echo "validate $call: median params/off $med (target >= 0.9)"
done
