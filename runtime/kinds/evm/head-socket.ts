// EVM's side of an upstream head socket (upstreams/head-sockets.ts holds the
// socket: one per upstream with `ws:`, its reconnects and checks): once open,
// it asks what the node serves, as a poll does (eth_chainId, the genesis
// block's hash), and subscribes to newHeads; each eth_subscription
// notification is a head. An upstream has no default socket: providers' ws
// URLs differ from their http ones (Infura's /ws/v3/KEY).
import type { HeadSocketProbe, SocketNews } from '../../upstreams/probe.ts';
import { quantity } from '../../jsonrpc/scan.ts';

const ID_CHAIN = 1;
const ID_GENESIS = 2;
const ID_SUBSCRIBE = 3;

const HELLO = [
  `{"jsonrpc":"2.0","id":${ID_CHAIN},"method":"eth_chainId","params":[]}`,
  `{"jsonrpc":"2.0","id":${ID_GENESIS},"method":"eth_getBlockByNumber","params":["0x0",false]}`,
  `{"jsonrpc":"2.0","id":${ID_SUBSCRIBE},"method":"eth_subscribe","params":["newHeads"]}`,
] as const;

/** What an eth_chainId result names, as a poll's report does ('chainId 1'); null: not a chain id. */
export function chainIdentity(result: unknown): string | null {
  const id = quantity(result);
  return id < 0 ? null : `chainId ${id}`;
}

export const evmHeadSocket: HeadSocketProbe<'evm-jsonrpc'> = {
  defaultUrl: null,
  hello: () => HELLO,
  read(_route, m): SocketNews | null {
    if (m.method === 'eth_subscription') {
      const head = m.params?.result as Record<string, unknown> | undefined;
      const n = quantity(head?.number);
      return n >= 0 && typeof head!.hash === 'string' ? { head: n, hash: head!.hash } : null;
    }
    switch (m.id) {
      case ID_CHAIN: {
        const identity = chainIdentity(m.result);
        return identity === null ? { refused: 'eth_chainId has no chain id' } : { identity };
      }
      case ID_GENESIS:
        return typeof m.result?.hash === 'string' ? { genesis: m.result.hash } : null;
      case ID_SUBSCRIBE:
        return typeof m.result === 'string' ? { subscribed: true } : { refused: String(m.error?.message ?? 'eth_subscribe refused') };
      default:
        return null;
    }
  },
};
