// A request Node's HTTP parser refused (bad bytes in the URL, oversized
// headers...) still gets an answer in its interface's envelope, chosen by the
// first path segment of the raw request line when it can be read.
import type { Duplex } from 'node:stream';
import type { DispatchTable } from '../chains.ts';

export function answerClientError(d: DispatchTable, err: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const line = err.rawPacket?.toString('latin1', 0, Math.min(err.rawPacket.length, 2048)).split('\r\n', 1)[0] ?? '';
  const target = line.split(' ')[1] ?? '';
  const first = target.startsWith('/') ? target.slice(1).split(/[/?]/, 1)[0]! : '';
  const answer = (d.chains.get(first)?.envelope ?? d.envelope)['malformed-http'];
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  // Rosetta answers every error with 500.
  const status = answer.status === 500 ? 500 : tooLarge ? 431 : 400;
  const reason = status === 500 ? 'Internal Server Error' : tooLarge ? 'Request Header Fields Too Large' : 'Bad Request';
  const head = line.startsWith('HEAD ');
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(answer.body)}\r\nconnection: close\r\n\r\n${head ? '' : answer.body}`,
  );
}
