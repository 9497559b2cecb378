// The metrics listener (`admin.metrics`): Prometheus text at /metrics, plus /healthz and /readyz for
// probes, answered as the admin socket answers them (routes/health.ts). Read-only: it exposes counts,
// never a grant id, token or destination.
import http from 'node:http';
import type net from 'node:net';
import type { ProxyControl } from '../core/index.js';
import { bindTcp } from '../listen/index.js';
import type { MetricsSink } from '../telemetry/index.js';
import { sendJson } from './http-io.js';
import { healthReply, readinessReply } from './routes/health.js';

export interface MetricsServer {
  readonly address: string;
  close(): Promise<void>;
}

function ledgerCounts(control: ProxyControl, nowMs: number): [number, number, number] {
  let active = 0;
  let revoked = 0;
  let expired = 0;
  for (const g of control.listGrants()) {
    if (g.revokedAt !== null) revoked += 1;
    else if (g.expiresAt !== null && Date.parse(g.expiresAt) <= nowMs) expired += 1;
    else active += 1;
  }
  return [active, revoked, expired];
}

export async function startMetricsServer(listen: string, metrics: MetricsSink, control: ProxyControl): Promise<MetricsServer> {
  const sockets = new Set<net.Socket>();
  const server = http.createServer({ headersTimeout: 10_000, requestTimeout: 10_000 }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' }).end('{"error":"method_not_allowed"}\n');
      return;
    }
    if (path === '/metrics') {
      metrics.ledger(...ledgerCounts(control, Date.now()));
      metrics.render().then(
        (rendered) => res.writeHead(200, { 'content-type': rendered.contentType }).end(rendered.body),
        () => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"metrics_failed"}\n'),
      );
      return;
    }
    // The admin socket's replies, byte for byte: one shape for a balancer whichever it probes.
    if (path === '/healthz') {
      sendJson(res, healthReply());
      return;
    }
    if (path === '/readyz') {
      sendJson(res, readinessReply(control));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}\n');
  });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(listen.slice(colon + 1));
  const address = await bindTcp(server, host, port);
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
