#!/usr/bin/env node
// The TLS floor of the `tls` part (bench/tls-setup.mjs): the net floor's CONNECT handling (the head read
// up to the blank line, the authority taken from the request line, `net.connect`, `200`, a pipe each
// way; no checks, no credentials read) behind three servers: plain TCP, `tls.createServer` with the
// listener's certificate, and the same requiring a client certificate from the client CA. What Node's
// own TLS costs per tunnel, so that the TLS rows of Sluice can be read against it.
// argv[2]: JSON { certFile, keyFile, clientCaFile }. Prints one line, {"plain":P,"tls":P,"cert":P}.
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

const cfg = JSON.parse(process.argv[2]);
const HEAD_LIMIT = 8192;

function onConnection(client) {
  client.setNoDelay(true);
  let buf = Buffer.alloc(0);
  const onData = (d) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) {
      if (buf.length > HEAD_LIMIT) client.destroy();
      return;
    }
    client.removeListener('data', onData);
    client.pause();
    const m = /^CONNECT ([^\s:]+):(\d+) HTTP\/1\.[01]\r\n/.exec(buf.toString('latin1', 0, Math.min(end + 2, 1024)));
    if (!m) return void client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    const rest = buf.subarray(end + 4);
    const upstream = net.connect({ host: m[1], port: Number(m[2]), noDelay: true }, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (rest.length) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  };
  client.on('data', onData);
  client.on('error', () => client.destroy());
}

const cert = fs.readFileSync(cfg.certFile);
const key = fs.readFileSync(cfg.keyFile);
const servers = {
  plain: net.createServer({ noDelay: true }, onConnection),
  tls: tls.createServer({ cert, key, noDelay: true }, onConnection),
  cert: tls.createServer({ cert, key, ca: fs.readFileSync(cfg.clientCaFile), requestCert: true, rejectUnauthorized: true, noDelay: true }, onConnection),
};
for (const s of [servers.tls, servers.cert]) s.on('tlsClientError', () => {});
const ports = {};
for (const [name, s] of Object.entries(servers)) {
  await new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', resolve);
  });
  ports[name] = s.address().port;
}
process.stdout.write(`${JSON.stringify(ports)}\n`);
