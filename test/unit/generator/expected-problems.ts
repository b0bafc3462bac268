// The exact lines `gateway check` prints for each fixture under
// test/fixtures/invalid/ (shared by validate.test.ts and cli.test.ts).
export const F = 'test/fixtures/invalid';
export const V = 'test/fixtures/valid';
const URL_HINT = '(hint: write http://host:port/path or https://...)';
const WS_HINT = '(hint: write ws://host:port/path or wss://host/path)';
const TEMPLATE_HINT = '(hint: write ${VAR} or ${VAR:-default})';

export const EXPECTED: Record<string, string[]> = {
  // Semantic checks, one fixture each.
  'duplicate-path': [`${F}/duplicate-path.yaml:9:13 chains[1] (ethereum): path 'ethereum' is already used on listener 'rpc' by chains[0]`],
  'reserved-path': [
    `${F}/reserved-path.yaml:8:11 chains[0] (healthz): path 'healthz' clashes with the server's own /healthz route (hint: reserved: healthz, readyz, metrics)`,
    `${F}/reserved-path.yaml:12:11 chains[1] (metrics): path 'metrics' clashes with the server's own /metrics route (hint: reserved: healthz, readyz, metrics)`,
  ],
  'unknown-method-set': [`${F}/unknown-method-set.yaml:12:14 chains[0] (ethereum): unknown methodSet 'evn' (hint: did you mean 'evm'?)`],
  'unknown-listener': [`${F}/unknown-listener.yaml:10:15 chains[0] (bitcoin): unknown listener 'explorr' (hint: did you mean 'explorer'?)`],
  'rosetta-network': [
    `${F}/rosetta-network.yaml:11:14 chains[0] (cardano): unknown Rosetta network 'testnet' (hint: use mainnet, preprod or preview)`,
    `${F}/rosetta-network.yaml:16:14 chains[1] (cardano-x): unknown Rosetta network 'preprd' (hint: did you mean 'preprod'? use mainnet, preprod or preview)`,
  ],
  'duplicate-chain-id': [`${F}/duplicate-chain-id.yaml:9:71 chains[1] (mainnet2): chainId 1 is already used on listener 'rpc' by chains[0]`],
  // Nor is a bad upstream URL (https://mainnet.infura.io/v3/KEY holds one).
  'upstream-url': [
    `${F}/upstream-url.yaml:14:9 chains[0] (ethereum) upstreams[0]: upstream is not an absolute http: or https: URL (it is ws:); the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/upstream-url.yaml:15:16 chains[0] (ethereum) upstreams[1]: upstream is not an absolute http: or https: URL (it is ftp:); the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/upstream-url.yaml:17:9 chains[0] (ethereum) upstreams[3]: upstream is not an absolute http: or https: URL; the URL is not shown, it may hold a key ${URL_HINT}`,
  ],
  // A bad ws URL is never echoed (it holds a provider's key): its position and at most its scheme say which.
  'upstream-ws': [
    `${F}/upstream-ws.yaml:13:40 chains[0] (ethereum) upstreams[0]: ws is not an absolute ws: or wss: URL (it is https:); the URL is not shown, it may hold a key ${WS_HINT}`,
    `${F}/upstream-ws.yaml:14:40 chains[0] (ethereum) upstreams[1]: ws is not an absolute ws: or wss: URL; the URL is not shown, it may hold a key ${WS_HINT}`,
    `${F}/upstream-ws.yaml:15:40 chains[0] (ethereum) upstreams[2]: ws is not an absolute ws: or wss: URL; the URL is not shown, it may hold a key ${WS_HINT}`,
    `${F}/upstream-ws.yaml:23:39 chains[1] (cardano) upstreams[0]: 'ws' applies to upstreams of blockbook, evm-jsonrpc chains only, not rosetta (hint: drop it: its upstreams have no socket the gateway uses)`,
  ],
  'upstream-headers': [
    `${F}/upstream-headers.yaml:10:14 chains[0] (ethereum) upstreams[0]: upstream is not an absolute http: or https: URL; the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/upstream-headers.yaml:13:11 chains[0] (ethereum) upstreams[0]: header 'authorization' is given twice (also as 'Authorization'; header names ignore case)`,
    `${F}/upstream-headers.yaml:14:18 chains[0] (ethereum) upstreams[0].headers.X-Key: nested '\${' in the default of '\${A:-...}' is not supported ${TEMPLATE_HINT}`,
    `${F}/upstream-headers.yaml:15:9 chains[0] (ethereum) upstreams[1]: upstream is not an absolute http: or https: URL; the URL is not shown, it may hold a key ${URL_HINT}`,
  ],
  'wrong-interface-fields': [
    `${F}/wrong-interface-fields.yaml:11:5 chains[0] (bitcoin): 'chainId' applies to evm-jsonrpc chains only, not blockbook`,
    `${F}/wrong-interface-fields.yaml:12:5 chains[0] (bitcoin): 'network' applies to rosetta chains only, not blockbook`,
    `${F}/wrong-interface-fields.yaml:18:5 chains[1] (ethereum): 'network' applies to rosetta chains only, not evm-jsonrpc`,
    `${F}/wrong-interface-fields.yaml:19:5 chains[1] (ethereum): 'sendtx' applies to blockbook chains only, not evm-jsonrpc`,
    `${F}/wrong-interface-fields.yaml:25:5 chains[2] (cardano): 'methods' applies to evm-jsonrpc chains only, not rosetta`,
  ],
  'admin-port': [
    `${F}/admin-port.yaml:5:22 listeners.explorer2.port: port 8080 is already used by listener 'explorer'`,
    `${F}/admin-port.yaml:7:16 admin.port: port 8545 is also the port of listener 'rpc' (hint: /metrics must stay off the public listeners; give admin its own port)`,
  ],
  'misspelt-method': [
    `${F}/misspelt-method.yaml:5:22 methodSets.evm[1]: unknown method 'eth_getBalanse' (hint: did you mean 'eth_getBalance'?)`,
    `${F}/misspelt-method.yaml:11:15 chains[0] (ethereum) methods[0]: unknown method 'eth_blockNumbr' (hint: did you mean 'eth_blockNumber'?)`,
  ],
  'bad-template': [
    `${F}/bad-template.yaml:3:16 listeners.rpc.port: unclosed '\${' in '\${RPC_PORT:-8545' ${TEMPLATE_HINT}`,
    `${F}/bad-template.yaml:4:21 listeners.explorer.port: must be <= 65535, not 70000`,
    `${F}/bad-template.yaml:11:41 chains[0] (eth) upstreams[1]: unclosed '\${' in 'http://\${HOST' ${TEMPLATE_HINT}`,
  ],

  // Pool settings (issue 33) against the chain's upstreams, allowlist and interface.
  'pool-settings': [
    `${F}/pool-settings.yaml:11:16 chains[0] (ethereum): unknown servedTip 'most' (hint: use all or majority)`,
    `${F}/pool-settings.yaml:12:16 chains[0] (ethereum): unknown broadcast 'some' (hint: did you mean 'one'? use all or one)`,
    `${F}/pool-settings.yaml:13:23 chains[0] (ethereum) hedge.afterMs: must be "p95", not 'p99' (hint: How long to wait before hedging: milliseconds, or p95 for the chain's own 95th-percentile answer time.)`,
    `${F}/pool-settings.yaml:15:27 chains[0] (ethereum) quorum.methods[1]: 'eth_sendRawTransaction' is a write; quorum compares reads only (hint: drop it from quorum.methods; broadcast decides where a transaction goes)`,
    `${F}/pool-settings.yaml:15:51 chains[0] (ethereum) quorum.methods[2]: 'eth_newFilter' answers about one node, so two upstreams never agree on it (hint: drop it from quorum.methods)`,
    `${F}/pool-settings.yaml:15:66 chains[0] (ethereum) quorum.methods[3]: 'eth_getBalanse' is not a method the chain allows (hint: did you mean 'eth_getBalance'?)`,
    `${F}/pool-settings.yaml:15:82 chains[0] (ethereum) quorum.methods[4]: 'eth_getProof' is not a method the chain allows (hint: add it to methodSets.evm or drop it from quorum.methods)`,
    `${F}/pool-settings.yaml:16:11 chains[0] (ethereum) quorum.of: asks 3 upstreams, and the chain has 2 (hint: add upstreams or lower quorum.of)`,
    `${F}/pool-settings.yaml:22:5 chains[1] (polygon): hedge needs a second upstream to send a read to, and the chain has one (hint: add an upstream or drop hedge)`,
    `${F}/pool-settings.yaml:23:16 chains[1] (polygon): broadcast 'all' needs more than one upstream, and the chain has one (hint: add an upstream or drop broadcast)`,
    `${F}/pool-settings.yaml:24:40 chains[1] (polygon) quorum.of: asks 2 upstreams, and the chain has 1 (hint: add upstreams or lower quorum.of)`,
    `${F}/pool-settings.yaml:31:5 chains[2] (bitcoin): 'rewriteTags' applies to evm-jsonrpc chains only, not blockbook`,
    `${F}/pool-settings.yaml:32:66 chains[2] (bitcoin) upstreams[1]: 'archive' applies to upstreams of evm-jsonrpc chains only, not blockbook (hint: drop it: archive routing is for EVM state older than pruneDepth)`,
    `${F}/pool-settings.yaml:37:5 chains[3] (cardano): 'pruneDepth' applies to evm-jsonrpc chains only, not rosetta`,
    `${F}/pool-settings.yaml:38:5 chains[3] (cardano): 'quorum' applies to evm-jsonrpc chains only, not rosetta`,
    `${F}/pool-settings.yaml:39:41 chains[3] (cardano) upstreams[0]: 'archive' applies to upstreams of evm-jsonrpc chains only, not rosetta (hint: drop it: archive routing is for EVM state older than pruneDepth)`,
  ],
  websocket: [
    `${F}/websocket.yaml:5:25 websocket.maxConnectionsPerKey: must be >= 1, not 0`,
    `${F}/websocket.yaml:6:19 websocket.pingIntervalMs: must be >= 1000, not 100`,
    `${F}/websocket.yaml:7:3 websocket: unknown field 'maxBuferedBytes' (hint: did you mean 'maxBufferedBytes'?)`,
    `${F}/websocket.yaml:13:16 chains[0] (ethereum) websocket: must be boolean, not string (hint: Also accept WebSocket upgrades on this chain's path and listener (evm-jsonrpc: true or false): the same calls as over HTTP and eth_subscribe to newHeads and logs (docs/websocket.md).)`,
    `${F}/websocket.yaml:19:5 chains[1] (cardano): 'websocket' applies to blockbook or evm-jsonrpc chains only, not rosetta`,
    `${F}/websocket.yaml:24:32 chains[2] (bitcoin) websocket.maxAddresses: must be >= 1, not 0`,
    `${F}/websocket.yaml:24:55 chains[2] (bitcoin) websocket.maxAddressesPerKey: must be integer, not number (hint: Distinct addresses one API key may subscribe to on the chain, over all its sockets together (default: one Blockbook socket's worth), so that no key takes the chain's capacity. A subscribeAddresses that would pass it gets an error answer.)`,
    `${F}/websocket.yaml:24:60 chains[2] (bitcoin) websocket: unknown field 'maxAdresses' (hint: did you mean 'maxAddresses'?)`,
  ],

  // eth_getLogs range caps (issue 39) where they cannot apply, and out of range.
  'log-ranges': [
    `${F}/log-ranges.yaml:11:15 chains[0] (ethereum): 'limits.maxLogRange' caps eth_getLogs ranges, and the chain does not allow eth_getLogs (hint: add eth_getLogs to methodSets.reads or drop limits.maxLogRange)`,
    `${F}/log-ranges.yaml:12:58 chains[0] (ethereum) upstreams[1]: 'maxLogRange' caps eth_getLogs ranges, and the chain does not allow eth_getLogs (hint: add eth_getLogs to methodSets.reads or drop maxLogRange)`,
    `${F}/log-ranges.yaml:17:28 chains[1] (polygon) limits.maxLogRange: must be >= 1, not 0`,
    `${F}/log-ranges.yaml:18:54 chains[1] (polygon) upstreams[0].maxLogRange: must be >= 1, not -5`,
    `${F}/log-ranges.yaml:22:15 chains[2] (bitcoin): 'limits.maxLogRange' applies to evm-jsonrpc chains only, not blockbook (hint: drop it: it caps eth_getLogs ranges)`,
    `${F}/log-ranges.yaml:23:45 chains[2] (bitcoin) upstreams[0]: 'maxLogRange' applies to upstreams of evm-jsonrpc chains only, not blockbook (hint: drop it: it caps eth_getLogs ranges)`,
  ],

  // Schema problems.
  'misspelt-field': [
    `${F}/misspelt-field.yaml:3:37 listeners.rpc: unknown field 'hots' (hint: did you mean 'host'?)`,
    `${F}/misspelt-field.yaml:4:1 (top level): unknown field 'limtis' (hint: did you mean 'limits'?)`,
    `${F}/misspelt-field.yaml:9:5 chains[0] (ethereum): unknown field 'chainid' (hint: did you mean 'chainId'?)`,
    // Not also "missing required field 'methods'": one typo, one problem.
    `${F}/misspelt-field.yaml:10:5 chains[0] (ethereum): unknown field 'method' (hint: did you mean 'methods'?)`,
    `${F}/misspelt-field.yaml:11:36 chains[0] (ethereum) upstreams[0]: unknown field 'wieght' (hint: did you mean 'weight'?)`,
    `${F}/misspelt-field.yaml:14:5 chains[1] (bitcoin): unknown field 'listner' (hint: did you mean 'listener'?)`,
    `${F}/misspelt-field.yaml:15:5 chains[1] (bitcoin): unknown field 'upstream' (hint: did you mean 'upstreams'?)`,
  ],
  'missing-required': [
    `${F}/missing-required.yaml:1:1 (top level): missing required field 'version'`,
    `${F}/missing-required.yaml:3:13 listeners.explorer: missing required field 'port'`,
    `${F}/missing-required.yaml:5:5 chains[0] (ethereum): missing required field 'methods' (required for evm-jsonrpc chains)`,
    `${F}/missing-required.yaml:9:5 chains[1] (cardano): missing required field 'network' (required for rosetta chains)`,
    `${F}/missing-required.yaml:13:7 chains[2] (bitcoin): missing required field 'listener'`,
    `${F}/missing-required.yaml:13:7 chains[2] (bitcoin): missing required field 'upstreams'`,
  ],
  'bad-values': [
    `${F}/bad-values.yaml:3:3 listeners: 'Public RPC' is not a valid name here (must match ^[a-z][a-z0-9_-]*$)`,
    `${F}/bad-values.yaml:4:16 listeners.rpc.port: 'http' is not a port number (hint: use 0..65535, or \${VAR:-default})`,
    `${F}/bad-values.yaml:5:12 rateLimit: '100/sec' does not match ^[1-9][0-9]*/(s|min|h)$ (hint: Default rate limit per key, as N/s, N/min or N/h; a key's own rateLimit wins. Omitted: no default limit.)`,
    `${F}/bad-values.yaml:6:25 limits.maxBodyBytes: must be >= 1, not 0`,
    `${F}/bad-values.yaml:6:39 limits.timeoutMs: must be integer, not number (hint: How long to wait for an upstream's answer, in milliseconds; then HTTP 504.)`,
    `${F}/bad-values.yaml:8:22 methodSets.evm[1]: 'ethChainId' does not match ^[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+$ (hint: A JSON-RPC method name.)`,
    `${F}/bad-values.yaml:9:3 methodSets: 'bad set' is not a valid name here (must match ^[A-Za-z][A-Za-z0-9_-]*$)`,
    `${F}/bad-values.yaml:15:14 chains[0] (ethereum) retries: must be >= 0, not -1`,
    `${F}/bad-values.yaml:17:9 chains[0] (ethereum) upstreams[0]: must be string or object, not integer (hint: An upstream: a URL string or an object.)`,
    `${F}/bad-values.yaml:18:34 chains[0] (ethereum) upstreams[1]: unknown upstream role 'backup' (hint: use primary or fallback)`,
    `${F}/bad-values.yaml:18:50 chains[0] (ethereum) upstreams[1].weight: must be >= 1, not 0`,
  ],

  // Schema and semantic problems together, in one run, sorted by position.
  'schema-and-semantic': [
    `${F}/schema-and-semantic.yaml:1:10 version: must be 1, not 2`,
    `${F}/schema-and-semantic.yaml:5:11 chains[0] (Ethereum) path: 'Ethereum' does not match ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ (hint: The first path segment: /<path>/... Lower-case letters, digits and dashes.)`,
    `${F}/schema-and-semantic.yaml:6:16 chains[0] (Ethereum): unknown interface 'evm' (hint: use blockbook, evm-jsonrpc or rosetta)`,
    `${F}/schema-and-semantic.yaml:8:16 chains[0] (Ethereum) upstreams: must list at least 1 (hint: Nodes or servers behind this chain: a URL string, or an object with options.)`,
    `${F}/schema-and-semantic.yaml:11:15 chains[1] (btc): unknown listener 'explorer' (hint: listeners: rpc)`,
    `${F}/schema-and-semantic.yaml:13:13 chains[1] (btc) sendtx: must be boolean, not string (hint: Forward Blockbook's sendtx (blockbook only).)`,
    `${F}/schema-and-semantic.yaml:14:5 chains[1] (btc): 'methods' applies to evm-jsonrpc chains only, not blockbook`,
    `${F}/schema-and-semantic.yaml:16:11 chains[2] (metrics): path 'metrics' clashes with the server's own /metrics route (hint: reserved: healthz, readyz, metrics)`,
    `${F}/schema-and-semantic.yaml:17:5 chains[2] (metrics): unknown field 'interfase' (hint: did you mean 'interface'?)`,
    `${F}/schema-and-semantic.yaml:19:17 chains[2] (metrics) upstreams[0]: upstream is not an absolute http: or https: URL; the URL is not shown, it may hold a key ${URL_HINT}`,
  ],

  // YAML itself: syntax errors and duplicate keys, with positions.
  'yaml-syntax': [
    `${F}/yaml-syntax.yaml:11:5 duplicate key 'upstreams' (keys in one mapping must be unique)`,
    `${F}/yaml-syntax.yaml:13:1 Flow sequence in block collection must be sufficiently indented and end with a ]`,
  ],
  // Anchors and merge keys: problems point where the text is written, once per chain using it.
  anchors: [
    `${F}/anchors.yaml:12:22 chains[0] (ethereum) upstreams[0]: upstream is not an absolute http: or https: URL (it is ftp:); the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/anchors.yaml:12:22 chains[1] (gnosis) upstreams[0]: upstream is not an absolute http: or https: URL (it is ftp:); the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/anchors.yaml:12:22 chains[2] (polygon) upstreams[0]: upstream is not an absolute http: or https: URL (it is ftp:); the URL is not shown, it may hold a key ${URL_HINT}`,
    `${F}/anchors.yaml:13:5 chains[0] (ethereum): unknown field 'retreis' (hint: did you mean 'retries'?)`,
    `${F}/anchors.yaml:13:5 chains[1] (gnosis): unknown field 'retreis' (hint: did you mean 'retries'?)`,
    `${F}/anchors.yaml:13:5 chains[2] (polygon): unknown field 'retreis' (hint: did you mean 'retries'?)`,
    `${F}/anchors.yaml:16:14 chains[1] (gnosis): chainId 1 is already used on listener 'rpc' by chains[0]`,
  ],
};
