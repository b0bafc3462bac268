// The WebSocket counters of one chain, kept as plain numbers and rendered on
// scrape (metrics.ts), and read by the status page.

/** Why the gateway or the client ended a socket (the access log's and the metric's reason). */
export const CLOSE_REASONS = ['client', 'slow', 'ping', 'drain', 'revoked', 'quota', 'gap', 'error'] as const;
export type CloseReason = (typeof CLOSE_REASONS)[number];

export class WsStats {
  /** Sockets open now. */
  connections = 0;
  /** Subscriptions held now, by type. */
  readonly subscriptions = { newHeads: 0, logs: 0 };
  /** Notifications sent, by subscription type. */
  readonly notifications = { newHeads: 0, logs: 0 };
  /** Sockets ended, by reason. */
  readonly closed = Object.fromEntries(CLOSE_REASONS.map((r) => [r, 0])) as Record<CloseReason, number>;

  constructor(readonly chain: string) {}
}
