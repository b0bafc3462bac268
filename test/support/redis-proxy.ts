// A TCP proxy in front of a redis-server (issue 44): a test can hold back
// Redis's answers to one gateway's commands (a slow link, a busy connection)
// while that gateway's subscriber connection (the key store's change feed)
// goes on, and wait for what the gateway sent or what its subscriber was told.
// No test framework in here.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './http.ts';

export interface RedisProxy {
  /** redis://127.0.0.1:PORT: the server's URL, through the proxy. */
  readonly url: string;
  /** From now on, Redis's answers on command connections wait (subscriber connections go on). */
  hold(): void;
  /** Sends what waited, in order, and lets answers through again. */
  release(): void;
  /** Resolves once a client sends, from now on, a command whose text includes `text` (case-insensitive). */
  sent(text: string): Promise<void>;
  /** Resolves once a subscriber connection is told, from now on, something whose text includes `text`. */
  told(text: string): Promise<void>;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
  /** It sent SUBSCRIBE: the change feed, never held. */
  subscriber: boolean;
  /** Answers held back while the proxy holds. */
  readonly held: Buffer[];
  /** The end of what each side sent last, so that a text cut across two chunks is still found. */
  clientTail: string;
  serverTail: string;
}

interface Wait {
  readonly text: string;
  readonly done: () => void;
}

const TAIL = 256;

export async function startRedisProxy(target: { port: number }): Promise<RedisProxy> {
  const pairs = new Set<Pair>();
  let holding = false;
  const sentWaits: Wait[] = [];
  const toldWaits: Wait[] = [];
  const match = (waits: Wait[], text: string): void => {
    for (let i = waits.length - 1; i >= 0; i--) if (text.includes(waits[i]!.text)) waits.splice(i, 1)[0]!.done();
  };
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, '127.0.0.1');
    const p: Pair = { client, server: upstream, subscriber: false, held: [], clientTail: '', serverTail: '' };
    pairs.add(p);
    client.on('data', (chunk: Buffer) => {
      const text = p.clientTail + chunk.toString('latin1').toLowerCase();
      if (text.includes('subscribe')) p.subscriber = true;
      match(sentWaits, text);
      p.clientTail = text.slice(-TAIL);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (p.subscriber) {
        const text = p.serverTail + chunk.toString('latin1');
        match(toldWaits, text);
        p.serverTail = text.slice(-TAIL);
      }
      if (holding && !p.subscriber) p.held.push(chunk);
      else client.write(chunk);
    });
    const end = (): void => {
      pairs.delete(p);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  const port = await freePort();
  await new Promise<void>((ok) => server.listen(port, '127.0.0.1', ok));
  const waitFor = (waits: Wait[], text: string, lower: boolean) => new Promise<void>((done) => waits.push({ text: lower ? text.toLowerCase() : text, done }));
  return {
    url: `redis://127.0.0.1:${port}`,
    hold: () => void (holding = true),
    release: () => {
      holding = false;
      for (const p of pairs) for (const chunk of p.held.splice(0)) p.client.write(chunk);
    },
    sent: (text) => waitFor(sentWaits, text, true),
    told: (text) => waitFor(toldWaits, text, false),
    close: () =>
      new Promise<void>((done) => {
        for (const p of pairs) {
          p.client.destroy();
          p.server.destroy();
        }
        server.close(() => done());
      }),
  };
}
