// Loaded into a gateway under test (`node --import <this file> gateway.mjs`):
// every JSON.parse of a text that holds PARSE_MARK is written, as one JSON
// line, to the file PARSE_LOG, so a test can count how many times the
// gateway parsed a call it sent (issue 37: the body is parsed once). With
// SCAN_LOG, every whole-text scan of such a text (runtime/jsonrpc/scan.ts
// scanSeen: the fast scan, answerSpans, splitBatchAnswer) is written there,
// as {"scan","text"} (issue 45: a call and its answer are each scanned once).
// Test use only; it changes nothing else.
import { appendFileSync } from 'node:fs';

const mark = process.env.PARSE_MARK;
const file = process.env.PARSE_LOG;
const scans = process.env.SCAN_LOG;
if (mark && file) {
  const parse = JSON.parse;
  JSON.parse = function countedParse(text, reviver) {
    if (typeof text === 'string' && text.includes(mark)) appendFileSync(file, `${JSON.stringify(text)}\n`);
    return parse.call(JSON, text, reviver);
  };
}
if (mark && scans) {
  const marked = Buffer.from(mark);
  globalThis[Symbol.for('chain-gateway.scan')] = (scan, text) => {
    if (text.includes(marked)) appendFileSync(scans, `${JSON.stringify({ scan, text: text.toString('utf8') })}\n`);
  };
}
