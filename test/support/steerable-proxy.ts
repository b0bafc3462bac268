// A stand-in between the gateway and a node that a test can steer while it
// runs (issue 31): switch it to another node (an upstream that starts serving
// another chain), hold back the answer to one chosen request (a slow node that
// answers from the state it had when asked), delay its answers to the
// gateway's polls (an upstream that reports its head late) or hold back the
// answer to the next one (a poll sent before a block, answered after it), and alter those
// answers (a broken proxy that answers a poll with no height). The target is
// asked the moment a request arrives: a held or delayed answer is the target's
// answer of that moment, delivered later.
//
// Every request is recorded, the gateway's own polls (User-Agent
// chain-gateway-health/...) apart with their answers and the time each answer
// was sent, so a test can tell when the gateway could first have known a
// new head. No test framework in here.
import { request } from 'undici';
import { close, createSafeServer, isHealthCheck, listen, parseJson, record, Waits } from './http.ts';
import { methodsIn, type RecordedRequest } from './recording-proxy.ts';

export interface PollRecord extends RecordedRequest {
  /** The answer as sent back, parsed (undefined when it is not JSON). */
  readonly answer: unknown;
  /** performance.now() of this process when the answer was written back. */
  readonly answeredAt: number;
}

export interface Hold {
  /** Resolves once the request has arrived and the target's answer to it is in hand (held). */
  readonly arrived: Promise<RecordedRequest>;
  /** Lets the held answer go (idempotent); it also goes by itself after `maxMs`. */
  release(): void;
  /** Resolves once the held answer has been written back. */
  readonly answered: Promise<void>;
}

export interface SteerableProxy {
  /** http://127.0.0.1:PORT, to be used in place of a node's URL. */
  readonly url: string;
  /** Requests from clients (not the gateway's polls), in arrival order. */
  readonly requests: RecordedRequest[];
  /** The gateway's polls (health checks, head polls), with their answers. */
  readonly polls: PollRecord[];
  /** Where requests go from now on. */
  steer(targetUrl: string): void;
  readonly target: string;
  /** Answers to the gateway's polls are written back this many ms after the target answered (0: at once). */
  pollDelayMs: number;
  /** Where set, the gateway's polls get what it makes of the target's JSON answer (and of the poll itself), not that answer. */
  pollAnswer: ((poll: unknown, answer: unknown) => unknown) | null;
  /**
   * Holds back the answer to the next client request `match` accepts (one
   * request only; the ones after it go through) until release(), or `maxMs`.
   */
  holdNext(match: (json: unknown) => boolean, maxMs: number): Hold;
  /** Holds back the answer to the next poll of the gateway (one only; the ones after it go through) until release(), or `maxMs`. */
  holdNextPoll(maxMs: number): Hold;
  /** JSON-RPC method names of the client requests, batches flattened. */
  methodsSeen(): string[];
  close(): Promise<void>;
}

interface Armed {
  readonly match: (json: unknown) => boolean;
  readonly onArrive: (r: RecordedRequest) => void;
  readonly gate: Promise<void>;
  readonly onAnswered: () => void;
}

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length']);

export async function startSteerableProxy(targetUrl: string): Promise<SteerableProxy> {
  let target = targetUrl.replace(/\/+$/, '');
  const requests: RecordedRequest[] = [];
  const polls: PollRecord[] = [];
  const armed: Armed[] = [];
  const armedPolls: Armed[] = [];
  const waits = new Waits();
  const wait = waits.wait;
  const self = {
    pollDelayMs: 0,
    pollAnswer: null as SteerableProxy['pollAnswer'],
  };

  const server = createSafeServer(async (req, res) => {
    const r = await record(req);
    const entry: RecordedRequest = { ...r, json: parseJson(r.body) };
    const poll = isHealthCheck(r);
    if (!poll) requests.push(entry);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    let status: number;
    let type: string;
    let body: Buffer;
    try {
      const up = await request(`${target}${r.url}`, { method: r.method as 'POST', headers, body: r.body.length > 0 ? r.body : null });
      status = up.statusCode;
      type = String(up.headers['content-type'] ?? 'application/json');
      body = Buffer.from(await up.body.arrayBuffer());
    } catch (err) {
      status = 502;
      type = 'text/plain';
      body = Buffer.from(`steerable proxy: target unreachable: ${(err as Error).message}`);
    }
    if (poll) {
      const alter = self.pollAnswer;
      const answer = parseJson(body);
      if (alter !== null && answer !== undefined) body = Buffer.from(JSON.stringify(alter(entry.json, answer)));
      if (self.pollDelayMs > 0) await wait(self.pollDelayMs);
      const a = armedPolls.shift();
      if (a !== undefined) {
        a.onArrive(entry);
        await a.gate;
        res.once('finish', a.onAnswered);
      }
    } else {
      const i = armed.findIndex((a) => a.match(entry.json));
      if (i !== -1) {
        const a = armed.splice(i, 1)[0]!;
        a.onArrive(entry);
        await a.gate;
        res.once('finish', a.onAnswered);
      }
    }
    if (res.destroyed) return;
    res.writeHead(status, { 'content-type': type, 'content-length': body.length });
    res.end(body);
    if (poll) polls.push({ ...entry, answer: parseJson(body), answeredAt: performance.now() });
  });
  const url = await listen(server);

  /** Holds back the answer to the next request `match` accepts on `list` (client requests', or polls'). */
  function hold(list: Armed[], match: (json: unknown) => boolean, maxMs: number): Hold {
    let onArrive!: (r: RecordedRequest) => void;
    let onAnswered!: () => void;
    let open!: () => void;
    const arrived = new Promise<RecordedRequest>((ok) => (onArrive = ok));
    const answered = new Promise<void>((ok) => (onAnswered = ok));
    const gate = new Promise<void>((ok) => (open = ok));
    const release = (): void => open();
    // Held at most maxMs from its arrival: the slow node answers in the end.
    void arrived.then(() => wait(maxMs)).then(release);
    list.push({ match, onArrive, gate, onAnswered });
    return { arrived, release, answered };
  }

  return {
    url,
    requests,
    polls,
    get target() {
      return target;
    },
    steer(to: string) {
      target = to.replace(/\/+$/, '');
    },
    get pollDelayMs() {
      return self.pollDelayMs;
    },
    set pollDelayMs(ms: number) {
      self.pollDelayMs = ms;
    },
    get pollAnswer() {
      return self.pollAnswer;
    },
    set pollAnswer(f: SteerableProxy['pollAnswer']) {
      self.pollAnswer = f;
    },
    holdNext: (match, maxMs) => hold(armed, match, maxMs),
    holdNextPoll: (maxMs) => hold(armedPolls, () => true, maxMs),
    methodsSeen: () => methodsIn(requests),
    close: async () => {
      waits.clear();
      await close(server);
    },
  };

}

/** A JSON-RPC call (single, or any item of a batch) of `method` whose params satisfy `params`. */
export function isCall(json: unknown, method: string, params: (p: unknown[]) => boolean = () => true): boolean {
  const items = Array.isArray(json) ? json : [json];
  return items.some((i) => {
    const c = i as { method?: unknown; params?: unknown } | null;
    return c !== null && typeof c === 'object' && c.method === method && params(Array.isArray(c.params) ? c.params : []);
  });
}

/**
 * A poll's answer with no height, as a broken proxy in front of a node gives
 * it: every answer to eth_blockNumber or to the `latest` block has a null
 * result; the rest (eth_chainId, other blocks) is the node's.
 */
export function withoutHeight(poll: unknown, answer: unknown): unknown {
  const calls = (Array.isArray(poll) ? poll : [poll]) as { id?: unknown; method?: unknown; params?: unknown }[];
  const isHead = (id: unknown): boolean =>
    calls.some((c) => c !== null && typeof c === 'object' && c.id === id && (c.method === 'eth_blockNumber' || (c.method === 'eth_getBlockByNumber' && Array.isArray(c.params) && c.params[0] === 'latest')));
  const alter = (a: unknown): unknown => (a !== null && typeof a === 'object' && isHead((a as { id?: unknown }).id) ? { ...(a as object), result: null } : a);
  return Array.isArray(answer) ? answer.map(alter) : alter(answer);
}

/**
 * The head number an EVM poll's answer reports (the highest latest block or
 * eth_blockNumber in it), -1 when it reports none. Read from the request and
 * answer pair by id, so it holds whatever else the poll asks in the same batch.
 */
export function polledHead(p: Pick<PollRecord, 'json' | 'answer'>): number {
  const calls = (Array.isArray(p.json) ? p.json : [p.json]) as { id?: unknown; method?: unknown; params?: unknown }[];
  const answers = (Array.isArray(p.answer) ? p.answer : [p.answer]) as { id?: unknown; result?: unknown }[];
  let head = -1;
  for (const c of calls) {
    if (c === null || typeof c !== 'object') continue;
    const latest = (c.method === 'eth_getBlockByNumber' && Array.isArray(c.params) && c.params[0] === 'latest') || c.method === 'eth_blockNumber';
    if (!latest) continue;
    const a = answers.find((x) => x !== null && typeof x === 'object' && x.id === c.id);
    const r = a?.result;
    const n = typeof r === 'string' ? r : r !== null && typeof r === 'object' ? (r as { number?: unknown }).number : undefined;
    if (typeof n === 'string' && /^0x[0-9a-f]+$/i.test(n)) head = Math.max(head, Number.parseInt(n, 16));
  }
  return head;
}
