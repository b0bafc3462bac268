#!/bin/bash
# Two builds of the gateway against each other, on one host in one run, for
# changes smaller than the harness's spread:
#   bench/ab.sh OLD_CHECKOUT NEW_CHECKOUT [small|big|batch|hit|rosetta|blockbook] [ROUNDS]
# small/big/batch: each checkout's dist/bench-gateway.mjs and .tmp/bench/keys.yaml
# (run `npm run bench` there once) in front of a node:http upstream answering
# the harness's fixture. rosetta/blockbook: one manifest with a Rosetta and a
# Blockbook chain, built by each checkout's own generator, in front of an
# upstream answering one fixed JSON body (POST /cardano-preprod/network/status,
# GET /bitcoin/v2/block/1?pageSize=10). hit: each checkout's bench manifest
# with a cache block, built by its own generator, loaded with eth_chainId (kept
# forever: every call after the first is a hit). Both gateways run at once, pinned to
# core 0 and loaded in turn; the upstream and wrk run on core 1. After 8 s of
# warm-up each, rounds of 5 s alternate which goes first. Prints req/s, p99
# (us) and new/old per round. Needs ../shared/bench, wrk and taskset.
# hit also runs `limit`, a bare node:http server answering the hit's own bytes
# from memory (bench/fixed-upstream.mjs) on core 0: Node's ceiling for that
# answer, loaded in the same rounds (the three rotate which goes first), and
# prints old/limit and new/limit per round and their medians at the end. hit's
# upstream is bench/rpc-upstream.mjs, which answers the poll (with a fixed body
# the chain is down and every call is a 503); the rounds start once eth_chainId
# answers X-Cache: HIT. Any round with an error answer stops the run. hit also
# runs `floor` (bench/hit-floor.ts, bundled from NEW): a bare node:http server
# doing, with the gateway's own code, what every answer does whatever the key
# or the cache (body read, request id, the gateway's headers, metrics, the
# access log line), on core 0: the ceiling of any hit path with logging and
# metrics on. It prints floor/limit and new/floor too.
# hit-big: the same with a cache of FILL (100,000) entries first (bench/fill-cache.mjs,
# eth_getBalance at a final block), and one of them loaded: a hit in a big store.
# Compare one checkout with itself: bench/ab.sh . . hit
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); S=${3:-small}; R=${4:-8}
HERE=$(dirname "$(realpath "$0")")
BENCH_DIR=${BENCH_DIR:-$HERE/../../shared/bench}
KEY=${API_KEY:-bench-key-5f2c9a7e-0123456789}
W=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT

node "$BENCH_DIR/gen-fixtures.mjs" "$W" >/dev/null 2>&1
case $S in
  small | big | batch) answer="$W/$S.resp.json" ;;
  rosetta | blockbook)
    answer="$W/edge.resp.json"
    echo '{"current_block_identifier":{"index":1000,"hash":"ab"},"current_block_timestamp":1700000000000,"genesis_block_identifier":{"index":0,"hash":"cd"},"peers":[]}' >"$answer"
    echo '{"network_identifier":{"blockchain":"cardano","network":"preprod"},"metadata":{}}' >"$W/rosetta.req.json"
    cat >"$W/gateway.yaml" <<'YAML'
version: 1
listeners:
  rpc: { host: 127.0.0.1, port: "${PORT}" }
keys: ./keys.yaml
health: { intervalMs: 5000, timeoutMs: 2000 }
chains:
  - { path: cardano-preprod, interface: rosetta, listener: rpc, network: preprod, upstreams: ["${UPSTREAM_URL}"] }
  - { path: bitcoin, interface: blockbook, listener: rpc, upstreams: ["${UPSTREAM_URL}api"] }
YAML
    printf 'keys:\n  - id: bench\n    sha256: "%s"\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" >"$W/keys.yaml"
    (cd "$W" && node "$OLD/bin/gateway.mjs" build gateway.yaml --out old.mjs && node "$NEW/bin/gateway.mjs" build gateway.yaml --out new.mjs) >/dev/null
    ;;
  hit | hit-big)
    # The cache's hit path: each checkout's bench manifest with a cache block, and a call kept forever
    # (eth_chainId) that the fixed-body node answers once; every later call is a hit.
    answer="$W/hit.resp.json"
    if [ "$S" = hit ]; then
      echo '{"jsonrpc":"2.0","id":1,"result":"0x1"}' >"$answer"
      echo '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' >"$W/hit.req.json"
    else
      # one of the FILL balances the cache is filled with first (bench/fill-cache.mjs's first address)
      echo '{"jsonrpc":"2.0","id":1,"result":"0xde0b6b3a7640000"}' >"$answer"
      echo '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","0x10"]}' >"$W/hit.req.json"
      cp "$W/hit.req.json" "$W/hit-big.req.json"
    fi
    printf 'keys:\n  - id: bench\n    sha256: "%s"\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" >"$W/keys.yaml"
    for side in old new; do
      dir=$([ $side = old ] && echo "$OLD" || echo "$NEW")
      sed 's/^chains:$/cache: { maxBytes: 67108864 }\nchains:/' "$dir/bench/gateway.bench.yaml" >"$W/hit-$side.yaml"
      (cd "$W" && node "$dir/bin/gateway.mjs" build "hit-$side.yaml" --out "$side.mjs") >/dev/null
    done
    ;;
  *) echo "ab.sh: unknown scenario '$S' (small, big, batch, hit, hit-big, rosetta, blockbook)" >&2; exit 2 ;;
esac
cat >"$W/get.lua" <<LUA
wrk.method = "GET"
wrk.headers["X-API-Key"] = "$KEY"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT rps=%.1f p99_us=%.0f err_connect=%.0f err_read=%.0f err_write=%.0f err_status=%.0f err_timeout=%.0f\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
LUA

if [ "${S%-big}" = hit ]; then
  # a node that answers the gateway's poll (a fixed body fails it: the chain is down and every call is a 503)
  taskset -c 1 node "$HERE/rpc-upstream.mjs" 18600 & pids+=($!)
else
  taskset -c 1 node "$HERE/fixed-upstream.mjs" "$answer" 18600 & pids+=($!)
fi
ports="18600 18601 18602"
if [ "${S%-big}" = hit ]; then
  # the ceiling: the same answer's bytes from memory, on the gateways' core, with no gateway in between
  taskset -c 0 node --no-memory-reducer "$HERE/fixed-upstream.mjs" "$answer" 18603 & pids+=($!)
  # the floor: the new checkout's own per-answer work (body, id, headers, metrics, access log) and nothing else
  "$NEW/node_modules/.bin/esbuild" "$HERE/hit-floor.ts" --bundle --platform=node --format=esm --log-level=warning \
    --banner:js="import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" --outfile="$W/floor.mjs"
  taskset -c 0 node --no-memory-reducer "$W/floor.mjs" "$answer" 18604 >/dev/null & pids+=($!)
  ports="$ports 18603 18604"
fi
start() { # checkout port
  local file="$1/dist/bench-gateway.mjs" keys="$1/.tmp/bench/keys.yaml"
  case $S in rosetta | blockbook | hit | hit-big) file="$W/$([ "$1" = "$OLD" ] && echo old || echo new).mjs" keys="$W/keys.yaml" ;; esac
  (cd "$1" && GATEWAY_KEYS_FILE="$keys" UPSTREAM_URL=http://127.0.0.1:18600/ PORT=$2 HOST=127.0.0.1 exec taskset -c 0 node --no-memory-reducer "$file" >/dev/null 2>&1) & pids+=($!)
}
start "$OLD" 18601
start "$NEW" 18602
for p in $ports; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
# a port another process holds would be measured instead: every process started here must still be running
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || { echo "ab.sh: a process it started has exited (is one of the ports $ports in use?)" >&2; exit 1; }; done

w() { # port seconds
  local pick='s/.*rps=\([0-9.]*\).*p99_us=\([0-9]*\).*/\1 \2/'
  case $S in
    blockbook) taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$W/get.lua" "http://127.0.0.1:$1/bitcoin/v2/block/1?pageSize=10" ;;
    rosetta) BENCH_BODY_FILE="$W/rosetta.req.json" BENCH_API_KEY=$KEY taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$BENCH_DIR/post.lua" "http://127.0.0.1:$1/cardano-preprod/network/status" ;;
    *) BENCH_BODY_FILE="$W/$S.req.json" BENCH_API_KEY=$KEY taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$BENCH_DIR/post.lua" "http://127.0.0.1:$1/eth" ;;
  esac | grep RESULT >"$W/result"
  # a round with an error answer (or a socket error) measured errors, not the gateway: stop
  if grep -qE 'err_[a-z]+=[1-9]' "$W/result"; then echo "ab.sh: port $1 answered with errors: $(cat "$W/result")" >&2; exit 1; fi
  sed "$pick" "$W/result"
}
if [ "${S%-big}" = hit ]; then
  if [ "$S" = hit-big ]; then
    for p in 18601 18602; do node "$HERE/fill-cache.mjs" "http://127.0.0.1:$p/eth" "$KEY" "${FILL:-100000}" >&2; done
  fi
  # the answer is kept once the poll after it has seen the upstream's identity again: wait for a HIT,
  # or this measures something else
  for p in 18601 18602; do
    for _ in $(seq 50); do
      x=$(curl -s -o /dev/null -D - -H "X-API-Key: $KEY" -H 'Content-Type: application/json' --data-binary @"$W/hit.req.json" "http://127.0.0.1:$p/eth" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
      [ "$x" = HIT ] && break
      sleep 0.1
    done
    [ "$x" = HIT ] || { echo "ab.sh: port $p: eth_chainId is X-Cache '$x' after 5 s, not HIT" >&2; exit 1; }
  done
fi
w 18601 8 >/dev/null; w 18602 8 >/dev/null
div() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN{printf "%.3f", a/b}'; }
med() { sort -g | awk '{v[NR]=$1} END{printf "%.3f", NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
if [ "${S%-big}" != hit ]; then
  for i in $(seq "$R"); do
    if [ $((i % 2)) = 1 ]; then o=$(w 18601 5); n=$(w 18602 5); else n=$(w 18602 5); o=$(w 18601 5); fi
    echo "$S round $i old $o new $n ratio $(div "$n" "$o")"
  done
  exit 0
fi
w 18603 8 >/dev/null; w 18604 8 >/dev/null
ro=() rn=() rr=() rf=() rnf=()
for i in $(seq "$R"); do
  # the four rotate which goes first
  case $((i % 4)) in
    1) o=$(w 18601 5); n=$(w 18602 5); l=$(w 18603 5); f=$(w 18604 5) ;;
    2) n=$(w 18602 5); l=$(w 18603 5); f=$(w 18604 5); o=$(w 18601 5) ;;
    3) l=$(w 18603 5); f=$(w 18604 5); o=$(w 18601 5); n=$(w 18602 5) ;;
    0) f=$(w 18604 5); o=$(w 18601 5); n=$(w 18602 5); l=$(w 18603 5) ;;
  esac
  ro+=("$(div "$o" "$l")") rn+=("$(div "$n" "$l")") rr+=("$(div "$n" "$o")") rf+=("$(div "$f" "$l")") rnf+=("$(div "$n" "$f")")
  echo "$S round $i old $o new $n ratio ${rr[-1]} limit $l floor $f old/limit ${ro[-1]} new/limit ${rn[-1]} floor/limit ${rf[-1]} new/floor ${rnf[-1]}"
done
echo "$S median of $R rounds: new/old $(printf '%s\n' "${rr[@]}" | med) old/limit $(printf '%s\n' "${ro[@]}" | med) new/limit $(printf '%s\n' "${rn[@]}" | med) floor/limit $(printf '%s\n' "${rf[@]}" | med) new/floor $(printf '%s\n' "${rnf[@]}" | med)"
