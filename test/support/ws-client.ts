// A WebSocket JSON-RPC client for the tests, on `ws`: it opens a socket (or
// reports the HTTP answer that refused the upgrade), sends calls, and keeps
// every notification by subscription id, in the order received.
import WebSocket from 'ws';

export interface Refusal {
  readonly status: number;
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;
}

export interface Notification {
  readonly subscription: string;
  readonly result: any;
}

export class RpcSocket {
  private nextId = 1;
  private readonly waiting = new Map<number | string, (v: any) => void>();
  /** Every answer that matched no call of this client (id null, or unasked), in order. */
  readonly strays: any[] = [];
  /** Notifications by subscription id, in the order received. */
  readonly notes = new Map<string, Notification[]>();
  /** Every text frame received, in order. */
  readonly frames: string[] = [];
  private readonly listeners: (() => void)[] = [];
  /** Batches sent, waiting for an answer (batch answers come in order: one socket, one answer each). */
  private readonly batches: ((answer: any[]) => void)[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const text = data.toString('utf8');
      this.frames.push(text);
      const doc = JSON.parse(text) as any;
      const batch = Array.isArray(doc) ? this.batches.shift() : undefined;
      if (batch !== undefined) batch(doc);
      else for (const m of Array.isArray(doc) ? doc : [doc]) {
        if (m.method === 'eth_subscription') {
          const id = m.params.subscription as string;
          let list = this.notes.get(id);
          if (list === undefined) this.notes.set(id, (list = []));
          list.push({ subscription: id, result: m.params.result });
        } else if (m.id !== null && m.id !== undefined && this.waiting.has(m.id)) {
          const w = this.waiting.get(m.id)!;
          this.waiting.delete(m.id);
          w(m);
        } else this.strays.push(m);
      }
      for (const l of this.listeners.splice(0)) l();
    });
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  /** One call; resolves with the whole answer object. */
  call(method: string, params: unknown[] = []): Promise<any> {
    const id = this.nextId++;
    return this.send({ jsonrpc: '2.0', id, method, params }, id);
  }

  /** Sends any JSON (or text) and resolves with the answer to `id`. */
  send(body: unknown, id: number | string): Promise<any> {
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.ws.send(typeof body === 'string' ? body : JSON.stringify(body));
    });
  }

  /** Sends a batch and resolves with the array that answers it. */
  batch(items: unknown[]): Promise<any[]> {
    return new Promise((resolve) => {
      this.batches.push(resolve);
      this.ws.send(JSON.stringify(items));
    });
  }

  /** Sends text and resolves with the next frame that is not a notification. */
  raw(text: string): Promise<any> {
    const before = this.strays.length;
    this.ws.send(text);
    return this.until(() => this.strays.length > before).then(() => this.strays[before]);
  }

  /** eth_subscribe; resolves with the subscription id (throws on an error answer). */
  async subscribe(...params: unknown[]): Promise<string> {
    const a = await this.call('eth_subscribe', params);
    if (a.error) throw new Error(`eth_subscribe: ${JSON.stringify(a.error)}`);
    return a.result as string;
  }

  of(sub: string): Notification[] {
    return this.notes.get(sub) ?? [];
  }

  /** Resolves once `cond` holds, checked after every frame (rejects after `ms`). */
  until(cond: () => boolean, ms = 20_000, what = 'condition'): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`websocket: no ${what} within ${ms} ms`)), ms);
      const check = (): void => {
        if (cond()) {
          clearTimeout(t);
          resolve();
        } else this.listeners.push(check);
      };
      this.listeners.push(check);
    });
  }

  close(): Promise<{ code: number; reason: string }> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close();
    return this.closed;
  }
}

/** Opens a socket; resolves with the client, or with the HTTP answer that refused the upgrade. */
export function openSocket(url: string, headers: Record<string, string> = {}): Promise<RpcSocket | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => resolve(new RpcSocket(ws)));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    ws.once('error', (err) => reject(err));
  });
}

/** openSocket, failing the test unless the upgrade succeeded. */
export async function connect(url: string, headers: Record<string, string> = {}): Promise<RpcSocket> {
  const s = await openSocket(url, headers);
  if (!(s instanceof RpcSocket)) throw new Error(`upgrade refused: ${s.status} ${s.body}`);
  return s;
}

export function wsUrl(httpUrl: string): string {
  return httpUrl.replace(/^http/, 'ws');
}
