// The id of each request in the access log, the upstream's X-Request-Id and
// the answer: the client's own X-Request-Id where it is printable ASCII, else
// one made here.
import { randomBytes } from 'node:crypto';

/** Whether a client's X-Request-Id is printable ASCII with no space (it goes into log lines and headers as it is). */
export function isPrintable(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/**
 * Request ids for requests that come without one: UUID-shaped (RFC 9562
 * version 8, the custom layout), 74 random bits made once per process and a
 * 48-bit counter, so ids are unique across processes and replicas without
 * asking for randomness per request.
 */
const ID_PREFIX = (() => {
  const h = randomBytes(10).toString('hex');
  const variant = ((parseInt(h[15]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(12, 15)}-${variant}${h.slice(16, 19)}-`;
})();
let idSeq = 0;
export function nextRequestId(): string {
  idSeq = (idSeq + 1) % 0x1000000000000;
  const n = idSeq.toString(16);
  return ID_PREFIX + ZEROS.slice(n.length) + n;
}
const ZEROS = '000000000000';
