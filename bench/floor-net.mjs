// The net-only Node floor: the least a Node proxy built on node:net can do (issue 16). No node:http.
// CONNECT: read the head up to \r\n\r\n, take the authority from the request line, net.connect, answer
// `HTTP/1.1 200 Connection Established`, pipe both ways. Absolute-form requests (the http scenario): a
// minimal forward. Each request head is rewritten to origin-form (`GET /path HTTP/1.1`), with
// Proxy-Authorization and Proxy-Connection dropped. One upstream connection per client connection goes
// to the first request's authority, and responses are piped back without being parsed. It handles
// bodiless requests and Content-Length bodies. A request for another authority on the same connection
// gets 400 and the connection closes. No identity, no policy, no DNS of its own, no logging.
// Usage: node bench/floor-net.mjs PORT [HOST]; prints "listening PORT" when ready.
import net from 'node:net';

const CRLFCRLF = Buffer.from('\r\n\r\n');
const MAX_HEAD = 64 * 1024;
const ESTABLISHED = Buffer.from('HTTP/1.1 200 Connection Established\r\n\r\n');

function authority(hostport, defaultPort) {
  let host = hostport;
  let port = defaultPort;
  const colon = hostport.lastIndexOf(':');
  if (colon > 0 && !hostport.endsWith(']')) {
    host = hostport.slice(0, colon);
    port = Number(hostport.slice(colon + 1));
  }
  if (host.startsWith('[')) host = host.slice(1, -1);
  return { host, port };
}

function refuse(client, status) {
  client.removeAllListeners('data');
  client.end(`HTTP/1.1 ${status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
}

const server = net.createServer({ noDelay: true }, (client) => {
  let buf = null;
  let upstream = null;
  let upstreamKey = null;
  let bodyLeft = 0;
  client.on('error', () => upstream?.destroy());
  client.on('close', () => upstream?.destroy());

  const onData = (chunk) => {
    // the rest of a forwarded request's body
    if (bodyLeft > 0) {
      const n = Math.min(bodyLeft, chunk.length);
      upstream.write(n === chunk.length ? chunk : chunk.subarray(0, n));
      bodyLeft -= n;
      if (n === chunk.length) return;
      chunk = chunk.subarray(n);
    }
    buf = buf ? Buffer.concat([buf, chunk]) : chunk;
    for (;;) {
      const end = buf.indexOf(CRLFCRLF);
      if (end < 0) {
        if (buf.length > MAX_HEAD) refuse(client, '431 Request Header Fields Too Large');
        return;
      }
      const lineEnd = buf.indexOf(13);
      const line = buf.toString('latin1', 0, lineEnd);
      const sp1 = line.indexOf(' ');
      const sp2 = line.lastIndexOf(' ');
      const method = line.slice(0, sp1);
      const target = line.slice(sp1 + 1, sp2);
      const rest = buf.subarray(end + 4);
      if (method === 'CONNECT') {
        client.removeListener('data', onData);
        client.pause();
        buf = null;
        const { host, port } = authority(target, 443);
        upstream = net.connect({ host, port, noDelay: true }, () => {
          client.write(ESTABLISHED);
          if (rest.length > 0) upstream.write(rest);
          upstream.pipe(client);
          client.pipe(upstream);
          client.resume();
        });
        upstream.on('error', () => client.destroy());
        return;
      }
      // absolute-form: http://host[:port]/path
      if (!target.startsWith('http://')) return refuse(client, '400 Bad Request');
      const slash = target.indexOf('/', 7);
      const hostport = slash < 0 ? target.slice(7) : target.slice(7, slash);
      const pathPart = slash < 0 ? '/' : target.slice(slash);
      let head = `${method} ${pathPart}${line.slice(sp2)}`;
      let contentLength = 0;
      const fields = buf.toString('latin1', lineEnd + 2, end).split('\r\n');
      for (const f of fields) {
        const lower = f.slice(0, 20).toLowerCase();
        if (lower.startsWith('proxy-authorization:') || lower.startsWith('proxy-connection:')) continue;
        if (lower.startsWith('content-length:')) contentLength = Number(f.slice(15).trim()) || 0;
        head += `\r\n${f}`;
      }
      head += '\r\n\r\n';
      if (upstream === null) {
        const { host, port } = authority(hostport, 80);
        upstreamKey = hostport;
        upstream = net.connect({ host, port, noDelay: true });
        upstream.on('error', () => client.destroy());
        upstream.pipe(client);
      } else if (hostport !== upstreamKey) {
        return refuse(client, '400 Bad Request');
      }
      upstream.write(head);
      const n = Math.min(contentLength, rest.length);
      if (n > 0) upstream.write(rest.subarray(0, n));
      bodyLeft = contentLength - n;
      const after = rest.subarray(n);
      buf = after.length > 0 ? after : null;
      if (buf === null) return;
    }
  };
  client.on('data', onData);
});
server.listen(Number(process.argv[2] ?? 0), process.argv[3] ?? '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
