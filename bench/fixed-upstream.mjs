// A node:http upstream answering every request with one fixed JSON body, for
// bench/ab.sh and bench/validate.sh:  node bench/fixed-upstream.mjs BODY_FILE PORT
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

const body = readFileSync(process.argv[2]);
createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
}).listen(Number(process.argv[3]), '127.0.0.1');
