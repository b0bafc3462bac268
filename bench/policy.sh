#!/bin/bash
# What a key's policy costs (issue 21): one build of the gateway, run twice on
# one host in one run, one with a plain key and one with a key that has every
# allow list set (origins, ips, userAgents, methods, contracts); the same
# requests to both, with an Origin and a User-Agent the lists allow.
#   bench/policy.sh [small|call|batch] [ROUNDS]
# small: the harness's eth_blockNumber; call: an eth_call to a listed contract
# (the contracts list checks it); batch: the harness's batch. Needs
# dist/bench-gateway.mjs (npm run bench, or `node bin/gateway.mjs build
# bench/gateway.bench.yaml --out dist/bench-gateway.mjs`), ../shared/bench,
# wrk and taskset. Gateways pinned to core 0, upstream and wrk on core 1,
# 8 s warm-up each, then rounds of 5 s alternating which goes first. Prints
# req/s, p99 (us) and policy/plain per round.
set -euo pipefail
S=${1:-small}; R=${2:-8}
HERE=$(dirname "$(realpath "$0")"); ROOT=$(realpath "$HERE/..")
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
KEY=bench-key-5f2c9a7e-0123456789
SHA=$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)
W=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT

node "$BENCH_DIR/gen-fixtures.mjs" "$W" >/dev/null 2>&1
case $S in
  small | batch) body="$W/$S.req.json"; answer="$W/$S.resp.json" ;;
  call)
    body="$W/call.req.json"; answer="$W/small.resp.json"
    echo '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x00000000000000000000000000000000000000aa","data":"0x70a08231"},"latest"]}' >"$body"
    ;;
  *) echo "policy.sh: unknown scenario '$S' (small, call, batch)" >&2; exit 2 ;;
esac
printf 'keys:\n  - id: plain\n    sha256: "%s"\n' "$SHA" >"$W/plain.yaml"
# The contracts list names the bench body's own addresses (and one more), so every call passes.
CONTRACTS=$(node -e '
const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const s = new Set(["0x00000000000000000000000000000000000000aa", "0x00000000000000000000000000000000000000bb"]);
for (const c of Array.isArray(b) ? b : [b]) { const p = c.params ?? []; const a = p[0] && typeof p[0] === "object" ? p[0].to : p[0]; if (typeof a === "string" && /^0x[0-9a-fA-F]{40}$/.test(a)) s.add(a); }
console.log([...s].map((a) => JSON.stringify(a)).join(", "));' "$body")
cat >"$W/policy.yaml" <<YAML
keys:
  - id: locked
    sha256: "$SHA"
    allow:
      origins: ["https://app.acme.io", "https://*.acme.io"]
      ips: ["10.0.0.0/8", "127.0.0.0/8", "2001:db8::/32"]
      userAgents: ["AcmeWallet/"]
      methods: [eth_blockNumber, eth_chainId, eth_gasPrice, eth_getBalance, eth_call, eth_getTransactionCount, eth_getBlockByNumber, eth_getCode, eth_estimateGas, eth_getLogs, net_version]
      contracts: [$CONTRACTS]
YAML
cat >"$W/up.mjs" <<'JS'
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
const body = readFileSync(process.argv[2]);
createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }); res.end(body); }); }).listen(18600, '127.0.0.1');
JS
cat >"$W/post.lua" <<LUA
local f = assert(io.open("$body", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "$KEY"
wrk.headers["Origin"] = "https://eu.acme.io"
wrk.headers["User-Agent"] = "Mozilla/5.0 AcmeWallet/2.1"
function done(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p99_us=%.0f non2xx=%d\n", summary.requests / (summary.duration / 1e6), latency:percentile(99), summary.errors.status))
end
LUA

taskset -c 1 node "$W/up.mjs" "$answer" & pids+=($!)
start() { # keys port
  (cd "$ROOT" && GATEWAY_KEYS_FILE="$1" UPSTREAM_URL=http://127.0.0.1:18600/ PORT=$2 HOST=127.0.0.1 exec taskset -c 0 node --no-memory-reducer dist/bench-gateway.mjs >/dev/null 2>&1) & pids+=($!)
}
start "$W/plain.yaml" 18601
start "$W/policy.yaml" 18602
for p in 18600 18601 18602; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done

# Both must answer the bench's request with the upstream's answer, not a refusal.
for p in 18601 18602; do
  got=$(curl -s -H 'content-type: application/json' -H "x-api-key: $KEY" -H 'origin: https://eu.acme.io' -H 'user-agent: Mozilla/5.0 AcmeWallet/2.1' --data-binary @"$body" "http://127.0.0.1:$p/eth")
  case $got in *'"error"'*) echo "policy.sh: port $p refused the bench's request: $got" >&2; exit 1 ;; esac
done

w() { # port seconds
  taskset -c 1 wrk -t1 -c50 -d"$2"s -s "$W/post.lua" "http://127.0.0.1:$1/eth" | grep RESULT | sed 's/.*rps=\([0-9.]*\).*p99_us=\([0-9]*\).*non2xx=\([0-9]*\).*/\1 \2 \3/'
}
w 18601 8 >/dev/null; w 18602 8 >/dev/null
for i in $(seq "$R"); do
  if [ $((i % 2)) = 1 ]; then o=$(w 18601 5); n=$(w 18602 5); else n=$(w 18602 5); o=$(w 18601 5); fi
  set -- $o; orps=$1 op99=$2 onon=$3
  set -- $n; nrps=$1 np99=$2 nnon=$3
  if [ "$onon" != 0 ] || [ "$nnon" != 0 ]; then echo "policy.sh: non-2xx answers (plain $onon, policy $nnon): the policy refused the bench's requests" >&2; exit 1; fi
  echo "$S round $i plain $orps $op99 policy $nrps $np99 ratio $(awk -v a="$nrps" -v b="$orps" 'BEGIN{printf "%.3f", a/b}')"
done
