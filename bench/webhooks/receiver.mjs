// The bench's webhook receiver: answers 200 at once over keep-alive, and reports each webhook-id's arrival time to its
// parent in batches (epoch milliseconds, the parent's clock base).
import http from 'node:http';

/** @type {[string, number][]} */
let batch = [];
const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  req.resume();
  req.on('end', () => {
    batch.push([String(req.headers['webhook-id']), performance.now() + performance.timeOrigin]);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: /** @type {import('node:net').AddressInfo} */ (server.address()).port }));
setInterval(() => {
  if (batch.length === 0) return;
  process.send?.({ ids: batch });
  batch = [];
}, 10);
process.on('disconnect', () => process.exit(0));
