// The WebSocket counters of one chain, kept as plain numbers and rendered on
// scrape (metrics.ts), and read by the status page. The subscription counts
// are by the chain's protocol's own types (kinds/socket.ts), kept by it.
import type { SocketCounts } from '../kinds/socket.ts';

/** Why the gateway or the client ended a socket (the access log's and the metric's reason). */
/** A protocol's own (kinds/socket.ts ProtocolCloseReason) among them: Connection implements its SocketLink. */
export const CLOSE_REASONS = ['client', 'slow', 'ping', 'drain', 'revoked', 'quota', 'gap', 'error'] as const;
export type CloseReason = (typeof CLOSE_REASONS)[number];

export class WsStats implements SocketCounts {
  /** Sockets open now. */
  connections = 0;
  /** Subscriptions held now, by type. */
  readonly subscriptions: Record<string, number>;
  /** Notifications sent, by subscription type. */
  readonly notifications: Record<string, number>;
  /** Sockets ended, by reason. */
  readonly closed = Object.fromEntries(CLOSE_REASONS.map((r) => [r, 0])) as Record<CloseReason, number>;

  constructor(
    readonly chain: string,
    types: readonly string[],
  ) {
    this.subscriptions = Object.fromEntries(types.map((t) => [t, 0]));
    this.notifications = Object.fromEntries(types.map((t) => [t, 0]));
  }
}
