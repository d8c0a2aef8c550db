// A webhook receiver for the listen benches, in its own process: answers every POST 200 at once and counts requests,
// body bytes and (for JSON arrays or {segments}) segments. GET /stats answers the counts. Prints {"port":N} when it listens.
import http from 'node:http';

const args = process.argv.slice(2);
const port = Number(args[args.indexOf('--port') + 1] ?? 0);
const stats = { requests: 0, bytes: 0, segments: 0, users: new Set() };

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ requests: stats.requests, bytes: stats.bytes, segments: stats.segments, users: stats.users.size }));
    return;
  }
  /** @type {Buffer[]} */
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    stats.requests++;
    stats.bytes += body.length;
    const uid = new URL(req.url ?? '/', 'http://x').searchParams.get('uid');
    if (uid) stats.users.add(uid);
    if ((req.headers['content-type'] ?? '').startsWith('application/json')) {
      try {
        const parsed = JSON.parse(body.toString());
        stats.segments += Array.isArray(parsed) ? parsed.length : Array.isArray(parsed?.segments) ? parsed.segments.length : 0;
      } catch {
        // counted as a request all the same
      }
    }
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => console.log(JSON.stringify({ port: /** @type {import('node:net').AddressInfo} */ (server.address()).port })));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
