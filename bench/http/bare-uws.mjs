// Baseline of the rest bench: a bare uWebSockets.js server answering one GET route with a constant JSON body (no auth, store or limits).
// Run: node bench/http/bare-uws.mjs --port N [--path /route] [--body-file file.json]. SIGTERM closes it.
import { readFileSync } from 'node:fs';
import uWS from 'uWebSockets.js';
import { parseArgs } from '../lib/report.mjs';

const { options } = parseArgs(process.argv.slice(2));
const port = Number(options.port ?? 0);
const route = typeof options.path === 'string' ? options.path : '/';
// The rest bench passes the body the real GET answered, so both sides send the same bytes.
const body = typeof options['body-file'] === 'string' ? readFileSync(options['body-file']) : Buffer.from('{"ok":true}');

/** @type {unknown} */
let listenSocket;
uWS
  .App()
  .get(route, (res) => {
    res.cork(() => {
      res.writeHeader('content-type', 'application/json').end(body);
    });
  })
  .listen('127.0.0.1', port, (token) => {
    if (!token) {
      process.stderr.write(`bare-uws: cannot listen on ${port}\n`);
      process.exit(1);
    }
    listenSocket = token;
    process.stdout.write(`${JSON.stringify({ msg: 'listening', port: uWS.us_socket_local_port(token) })}\n`);
  });

process.on('SIGTERM', () => {
  if (listenSocket) uWS.us_listen_socket_close(/** @type {any} */ (listenSocket));
  process.exit(0);
});
