// Fills a gateway's cache for bench/ab.sh hit-big: N distinct eth_getBalance
// calls at a final block (kept forever), 32 at a time on keep-alive
// connections; every answer must be 200.   node bench/fill-cache.mjs URL KEY N
import { Agent, request } from 'node:http';

const [url, key, count] = [process.argv[2], process.argv[3], Number(process.argv[4])];
const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const address = (i) => `0x${i.toString(16).padStart(40, '0')}`;
let next = 0;
let bad = 0;
function one(i) {
  const body = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["${address(i)}","0x10"]}`;
  return new Promise((done, fail) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': key, 'content-length': body.length } }, (res) => {
      if (res.statusCode !== 200) bad++;
      res.resume();
      res.on('end', done);
    });
    req.on('error', fail);
    req.end(body);
  });
}
async function worker() {
  while (next < count) await one(next++);
}
await Promise.all(Array.from({ length: 32 }, worker));
agent.destroy();
if (bad > 0) {
  console.error(`fill-cache: ${bad} of ${count} answers were not 200`);
  process.exit(1);
}
console.log(`fill-cache: ${count} calls`);
