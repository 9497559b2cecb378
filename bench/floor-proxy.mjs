// The Node floor: the least a Node proxy can do. CONNECT tunnels and absolute-form forwarding with
// node:http and node:net, no identity, no policy, no DNS of its own, no logging. Sluice is measured
// against it. Usage: node bench/floor-proxy.mjs PORT [HOST]; prints "listening PORT" when ready.
import http from 'node:http';
import net from 'node:net';

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
const server = http.createServer((req, res) => {
  let url;
  try { url = new URL(req.url); } catch { res.writeHead(400).end(); return; }
  const headers = { ...req.headers };
  delete headers['proxy-authorization'];
  delete headers['proxy-connection'];
  const out = http.request({ host: url.hostname, port: url.port || 80, path: url.pathname + url.search, method: req.method, headers, agent }, (ores) => {
    res.writeHead(ores.statusCode, ores.headers);
    ores.pipe(res);
  });
  out.on('error', () => { if (!res.headersSent) res.writeHead(502); res.end(); });
  if (req.method === 'GET' || req.method === 'HEAD') out.end(); else req.pipe(out);
});
server.on('connect', (req, client, head) => {
  const [host, port] = [req.url.slice(0, req.url.lastIndexOf(':')), Number(req.url.slice(req.url.lastIndexOf(':') + 1))];
  const upstream = net.connect({ host: host.replace(/^\[|\]$/g, ''), port, noDelay: true }, () => {
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  client.setNoDelay(true);
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  client.on('close', () => upstream.destroy());
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), process.argv[3] ?? '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
