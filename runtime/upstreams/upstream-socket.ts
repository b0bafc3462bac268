// An upstream's one WebSocket as the users beside its heads see it (issue 46):
// head-sockets.ts holds it (Upstream.socket); a kind's other traffic on it
// (Blockbook's address and fiat subscriptions, kinds/blockbook/socket-hub.ts)
// attaches as a SocketUser. Apart from head-sockets.ts so that upstream.ts
// can name it without importing the socket.

/** Who uses an upstream's socket beside its heads (a kind's subscriptions): what it is told. */
export interface SocketUser {
  /** A message that is no head news, parsed. */
  message(m: Record<string, unknown>): void;
  /** It closed (opened again after its backoff): what was sent on it is gone. */
  down(): void;
}

/** An upstream's socket as its other users see it (Upstream.socket). */
export interface UpstreamSocket {
  /** Verified (it serves the chain a poll found) and subscribed to heads: a user starts on it only then. */
  readonly live: boolean;
  attach(user: SocketUser): void;
  detach(user: SocketUser): void;
  /** Sends one message while it is live; false: it is not. */
  send(text: string): boolean;
}
