// Threat: domain fronting (Fifield et al., "Blocking-resistant communication through domain fronting",
// PETS 2015; MITRE ATT&CK T1090.004). A sandbox opens CONNECT to a granted name, then sends a TLS
// ClientHello whose server_name (RFC 6066 §3) names another service behind the same front, so the bytes
// reach an ungranted destination through a granted address. For a grant with `tls.requireSniMatch`,
// Sluice reads the ClientHello from the first tunnel bytes (RFC 8446 §4.1.2; nothing is decrypted or
// altered) and closes the tunnel with sni_mismatch when the server name is another name, is absent for a
// name destination, or the bytes are not a ClientHello; IP-literal destinations carry no server name
// (RFC 6066 §3), so none is required there and any name is fronting. The origin must receive no byte of
// a refused tunnel: a raw recorder in front of it keeps every byte. The dial itself precedes the check
// (the 200 is sent only once the pinned address connected), so the origin does see a TCP connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import tls from 'node:tls';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-front';
const LOOSE = 'tok-front-loose';

/** A TCP relay in front of an origin that counts the bytes each of its connections is sent. */
interface Recorder {
  port: number;
  /** Bytes received on each connection, in accept order. */
  readonly perConnection: readonly number[];
  close(): Promise<void>;
}

async function startRecorder(targetPort: number): Promise<Recorder> {
  const perConnection: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const index = perConnection.push(0) - 1;
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.once('close', () => sockets.delete(s));
    }
    client.on('data', (chunk: Buffer) => (perConnection[index] = (perConnection[index] ?? 0) + chunk.length));
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    perConnection,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}

interface TlsOutcome {
  secure: boolean;
  response: string;
  error: string | null;
}

/** Runs TLS over an established tunnel; with `request`, sends it once secure and reads until close. */
function tlsOver(socket: net.Socket, options: tls.ConnectionOptions, request?: string): Promise<TlsOutcome> {
  return new Promise((resolve) => {
    const client = tls.connect({ ...options, socket });
    let secure = false;
    let response = '';
    let error: string | null = null;
    const timer = setTimeout(() => client.destroy(), 5000);
    client.on('secureConnect', () => {
      secure = true;
      if (request === undefined) client.end();
      else client.write(request);
    });
    client.on('data', (chunk: Buffer) => (response += chunk.toString()));
    client.on('error', (e) => (error = e.message));
    client.on('close', () => {
      clearTimeout(timer);
      resolve({ secure, response, error });
    });
  });
}

describe('domain-fronting guard (tls.requireSniMatch)', () => {
  let pki: TestPki;
  let origin: Origin;
  let recorder: Recorder;
  let sluice: TestSluice;
  let R: number;

  beforeAll(async () => {
    pki = createTestPki(['front.test', 'other.test', '127.0.0.1']);
    origin = await startHttpsOrigin(pki);
    recorder = await startRecorder(origin.port);
    R = recorder.port;
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'f',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`https://front.test:${R}`, `https://127.0.0.1:${R}`],
            allowAddressClasses: ['loopback'],
            tls: { requireSniMatch: true },
          },
          { id: 'loose', tokenSha256: tokenHash(LOOSE), destinations: [`https://front.test:${R}`], allowAddressClasses: ['loopback'] },
        ],
      },
      { lookup: tableLookup({ 'front.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await recorder?.close();
    await origin?.close();
  });

  const open = async (target: string, token = TOKEN): Promise<net.Socket> => {
    const tunnel = await openConnectTunnel(sluice.port, target, { 'Proxy-Authorization': `Bearer ${token}` });
    expect(tunnel.status).toBe(200);
    return tunnel.socket;
  };

  it('lets curl through when the server name is the authorized host (real TLS, verified end to end)', async () => {
    const result = await runCurl(['-i', '--proxy', `http://f:${TOKEN}@127.0.0.1:${sluice.port}`, '--cacert', pki.caFile, `https://front.test:${R}/fronted`]);
    expect(result.stderr).toBe('');
    const response = curlHeadersAndBody(result.stdout);
    expect(response.status).toBe(200);
    expect(response.body).toBe('origin:GET:/fronted');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', canonical: `front.test:${R}` });
  });

  it.each([
    ['another server name', { servername: 'other.test' }, 'server name other.test is not front.test'],
    ['no server name for a name destination', { host: '127.0.0.1' }, 'no server name for a name destination'],
  ])('closes the tunnel on %s with sni_mismatch; the origin receives no byte', async (_name, options, detail) => {
    const first = recorder.perConnection.length;
    const requests = origin.requests.length;
    const decisions = sluice.decisions().length;
    const socket = await open(`front.test:${R}`);
    const outcome = await tlsOver(socket, { ...options, ca: pki.caPem, checkServerIdentity: () => undefined });
    expect(outcome.secure).toBe(false);
    // The pinned address was dialed (one connection), and not one byte crossed it.
    expect(recorder.perConnection.slice(first)).toEqual([0]);
    expect(origin.requests.length).toBe(requests);
    // One decision for the hop: the refusal, with no earlier "granted" record for it.
    expect(sluice.decisions().slice(decisions)).toEqual([expect.objectContaining({ decision: 'deny', reason: 'sni_mismatch', detail, canonical: `front.test:${R}` })]);
  });

  it('refuses first bytes that are not a ClientHello (plain HTTP in a tunnel)', async () => {
    const first = recorder.perConnection.length;
    const socket = await open(`front.test:${R}`);
    const closed = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        socket.destroy();
        resolve(false);
      }, 5000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.resume();
    socket.write(`GET /plain HTTP/1.1\r\nHost: other.test\r\n\r\n`);
    expect(await closed).toBe(true);
    expect(recorder.perConnection.slice(first)).toEqual([0]);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'sni_mismatch', detail: 'the first bytes are not a TLS ClientHello' });
  });

  it('refuses a server name on an IP-literal destination (fronting through an address)', async () => {
    const first = recorder.perConnection.length;
    const socket = await open(`127.0.0.1:${R}`);
    const outcome = await tlsOver(socket, { servername: 'other.test', ca: pki.caPem });
    expect(outcome.secure).toBe(false);
    expect(recorder.perConnection.slice(first)).toEqual([0]);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'sni_mismatch', detail: `server name other.test on an address destination` });
  });

  it('allows an IP-literal destination with no server name, relaying the ClientHello unchanged', async () => {
    const socket = await open(`127.0.0.1:${R}`);
    // host is an IP literal, so Node sends no server_name; the certificate has an IP SAN for 127.0.0.1.
    const outcome = await tlsOver(socket, { host: '127.0.0.1', ca: pki.caPem }, 'GET /ip HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    expect(outcome.error).toBeNull();
    expect(outcome.secure).toBe(true);
    expect(outcome.response).toMatch(/^HTTP\/1\.1 200 /);
    expect(outcome.response).toContain('origin:GET:/ip');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', canonical: `127.0.0.1:${R}` });
  });

  it('is opt-in: a grant without requireSniMatch relays the same mismatched ClientHello', async () => {
    const socket = await open(`front.test:${R}`, LOOSE);
    const outcome = await tlsOver(socket, { servername: 'other.test', ca: pki.caPem }, 'GET /loose HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n');
    expect(outcome.secure).toBe(true);
    expect(outcome.response).toContain('origin:GET:/loose');
  });
});
