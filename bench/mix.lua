-- wrk script of `npm run bench:mix` (bench/mix.mjs writes its inputs).
--
-- MIX_BODIES: one request per line, made from the seeded mix, cycled through in order:
--   S <json>                 a fixed body
--   B <id> <k> <full>        eth_getBlockByNumber of the head known now minus k
--   H <id> <k>               eth_getBlockByHash of the k-th newest block known now (1: the head)
--   T <id> <k>               eth_getTransactionReceipt of the k-th newest tx sent by the background sender
-- MIX_STATE: what the chain looks like now, rewritten (by rename) as blocks come: the head number,
--   the count and hashes of the newest blocks (newest first), the count and hashes of the newest txs.
--   Read again at most once a second, when a request needs it.
-- Every answer is checked: a status other than 200, or a body with an "error" member, is an error
-- (counted per thread, summed in done()); "result":null answers are counted apart (receipts of txs
-- not yet mined are null, as a wallet polling its own tx sees them).
local bodies_file = assert(os.getenv("MIX_BODIES"), "MIX_BODIES not set")
local state_file = assert(os.getenv("MIX_STATE"), "MIX_STATE not set")
local headers = { ["Content-Type"] = "application/json", ["X-API-Key"] = os.getenv("MIX_API_KEY") or "" }
-- MIX_CLIENT_BATCH=N (default 1): each request is a JSON-RPC batch of the next N calls, as a client that batches sends them.
local per = tonumber(os.getenv("MIX_CLIENT_BATCH") or "1") or 1

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

-- Below: per thread (each thread has its own Lua state).
errors = 0
nulls = 0
answers = 0
local reqs, n, i = {}, 0, 0
local head, blocks, txs, read_at = 0, {}, {}, -1

local function read_state()
  local f = io.open(state_file, "r")
  if not f then return end
  local h = tonumber(f:read("*l"))
  local nb = tonumber(f:read("*l")) or 0
  local b = {}
  for k = 1, nb do b[k] = f:read("*l") end
  local nt = tonumber(f:read("*l")) or 0
  local t = {}
  for k = 1, nt do t[k] = f:read("*l") end
  f:close()
  if h and #b > 0 and #t > 0 then head, blocks, txs = h, b, t end
end

function init(args)
  for line in io.lines(bodies_file) do
    local kind = line:sub(1, 1)
    if kind == "S" then
      -- One call alone: the request made once; in a batch: the call's text.
      reqs[#reqs + 1] = per == 1 and wrk.format("POST", wrk.path, headers, line:sub(3)) or { "S", line:sub(3) }
    else
      local id, k, extra = line:match("^. (%S+) (%d+) ?(%S*)$")
      reqs[#reqs + 1] = { kind, id, tonumber(k), extra }
    end
  end
  n = #reqs
  i = math.floor((tid or 0) * n / 7) % n -- threads start apart
  read_state()
end

local function body_of(r)
  local kind, id, k = r[1], r[2], r[3]
  local method, params
  if kind == "S" then
    return id
  elseif kind == "B" then
    local num = head - k
    if num < 0 then num = 0 end
    method, params = "eth_getBlockByNumber", string.format('["0x%x",%s]', num, r[4])
  elseif kind == "H" then
    method, params = "eth_getBlockByHash", '["' .. blocks[math.min(k, #blocks)] .. '",false]'
  else
    method, params = "eth_getTransactionReceipt", '["' .. txs[math.min(k, #txs)] .. '"]'
  end
  return '{"jsonrpc":"2.0","id":' .. id .. ',"method":"' .. method .. '","params":' .. params .. '}'
end

function request()
  local now = os.time()
  if now ~= read_at then
    read_at = now
    read_state()
  end
  if per > 1 then
    local calls = {}
    for c = 1, per do
      i = i + 1
      if i > n then i = 1 end
      calls[c] = body_of(reqs[i])
    end
    return wrk.format("POST", wrk.path, headers, "[" .. table.concat(calls, ",") .. "]")
  end
  i = i + 1
  if i > n then i = 1 end
  local r = reqs[i]
  if type(r) == "string" then return r end
  return wrk.format("POST", wrk.path, headers, body_of(r))
end

function response(status, hdrs, body)
  answers = answers + 1
  if status ~= 200 or body:find('"error"', 1, true) then
    errors = errors + 1
  elseif body:find('"result":null', 1, true) then
    nulls = nulls + 1
  end
end

function done(summary, latency, requests)
  local e, nl, a = 0, 0, 0
  for _, t in ipairs(threads) do
    e = e + t:get("errors")
    nl = nl + t:get("nulls")
    a = a + t:get("answers")
  end
  local x = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%.0f seconds=%.3f rps=%.1f p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f bytes=%.0f " ..
    "answers=%.0f errors=%.0f nulls=%.0f err_connect=%.0f err_read=%.0f err_write=%.0f err_status=%.0f err_timeout=%.0f\n",
    summary.requests, secs, summary.requests / secs, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, summary.bytes, a, e, nl, x.connect, x.read, x.write, x.status, x.timeout))
end
