// TLS listeners from the attacker's side (issue 28). The attacks: finishing a handshake without a
// certificate, with one from another CA, an expired or not-yet-valid one, or one the CRL revokes (RFC 5280
// §6.3), in TLS 1.2 and 1.3 (where the server judges the client's certificate after the client thinks the
// handshake is done, RFC 8446 §4.4.2); a valid certificate no grant names, or whose CN happens to be a
// grant id (smokescreen's CN default); a certificate of grant A carrying grant B's token; a client-initiated
// renegotiation (CVE-2009-3555, CVE-2011-1473) and a TLS 1.2 client against a TLSv1.3-only listener
// (RFC 8996); plain text to a TLS port; a client that opens and stalls, or sends half a ClientHello;
// a grant revoked under a live tunnel; a PROXY v2 header before the ClientHello (haproxy send-proxy-v2).
// Then rotation: a client CA bundle of two CAs (a rotation's overlap) with both CAs' CRLs in one crlFile,
// each in force; a reload that swaps the client CA keeps live tunnels and changes who may handshake next;
// a file set that does not load is refused naming its key, at reload, start and check-config.
// Every refusal is asserted by its decision record and by the echo origin never being reached.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startApp, type SluiceApp } from '../../src/app.js';
import type { AuditRecordV1, DecisionRecordV1 } from '../../src/audit/index.js';
import { loadConfig } from '../../src/config/index.js';
import { createClientPki, type ClientPki, type IssuedCertificate } from '../support/client-pki.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { parseResponseHead, rawRequest, roundTrip } from '../support/raw-client.js';
import { BIN } from '../support/sluice-process.js';
import { OWN_UID, silentLog, startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitForClose, waitUntil, withTimeout } from '../support/wait.js';

const HEADERS_MS = 300;
const TOKEN_A = 'tok-tls-grant-a';
const TOKEN_B = 'tok-tls-grant-b';
const TOKEN_CN = 'tok-tls-grant-cn';
const URI_A = 'spiffe://sluice.test/agent-a';
const URI_B = 'spiffe://sluice.test/agent-b';
const URI_NEW_CA = 'spiffe://other.test/agent';

const URI_BUNDLE = 'spiffe://other.test/bundle-agent';

let pki: ClientPki;
let echo: EchoServer;
let sluice: TestSluice;
const ports: Record<string, number> = {};
/** Certificates of the second CA of a two-CA bundle: one valid, one its own CRL revokes (same URI SAN). */
let secondCa: { valid: IssuedCertificate; revoked: IssuedCertificate };

/** A client CA bundle of two CAs and a crlFile with each CA's CRL, as a CA rotation's overlap has them. */
function writeBundle(): { clientCaFile: string; crlFile: string } {
  const valid = pki.issue(pki.otherCa, 'bundle-valid', { uris: [URI_BUNDLE] });
  const revoked = pki.issue(pki.otherCa, 'bundle-revoked', { uris: [URI_BUNDLE] });
  secondCa = { valid, revoked };
  const clientCaFile = path.join(pki.dir, 'bundle-ca.pem');
  fs.writeFileSync(clientCaFile, pki.clientCa.certPem + pki.otherCa.certPem);
  const crlFile = path.join(pki.dir, 'bundle.crl.pem');
  fs.writeFileSync(crlFile, fs.readFileSync(pki.crlFile, 'utf8') + fs.readFileSync(pki.writeCrl(pki.otherCa, [revoked], 'other-ca'), 'utf8'));
  return { clientCaFile, crlFile };
}

beforeAll(async () => {
  pki = createClientPki();
  echo = await startTcpEchoServer();
  const serverFiles = { certFile: pki.server.certFile, keyFile: pki.server.keyFile };
  const certificateTls = { ...serverFiles, clientCaFile: pki.clientCa.certFile, crlFile: pki.crlFile };
  const destinations = [`tcp://127.0.0.1:${echo.port}`];
  sluice = await startSluice({
    listeners: [
      { name: 'cert', listen: '127.0.0.1:0', identify: 'certificate', tls: certificateTls },
      { name: 'token13', listen: '127.0.0.1:0', identify: 'token', tls: { ...serverFiles, minVersion: 'TLSv1.3' } },
      { name: 'token12', listen: '127.0.0.1:0', identify: 'token', tls: serverFiles },
      { name: 'lb', listen: '127.0.0.1:0', identify: 'certificate', tls: certificateTls, proxyProtocol: { trustedSources: ['127.0.0.1/32'] } },
      { name: 'bundle', listen: '127.0.0.1:0', identify: 'certificate', tls: { ...serverFiles, ...writeBundle() } },
    ],
    timeouts: { headersMs: HEADERS_MS },
    grants: [
      { id: 'A', tokenSha256: tokenHash(TOKEN_A), clientCertificate: { uriSan: URI_A }, destinations, allowAddressClasses: ['loopback'] },
      { id: 'B', tokenSha256: tokenHash(TOKEN_B), clientCertificate: { uriSan: URI_B }, destinations, allowAddressClasses: ['loopback'] },
      // The revoked certificate's own grant: were the CRL not enforced, that certificate would be served.
      { id: 'R', clientCertificate: { uriSan: 'spiffe://sluice.test/revoked' }, destinations, allowAddressClasses: ['loopback'] },
      // A grant whose id is the no-SAN certificate's CN: a CN default would map that certificate to it.
      { id: 'no-san', tokenSha256: tokenHash(TOKEN_CN), destinations, allowAddressClasses: ['loopback'] },
      { id: 'second-ca', clientCertificate: { uriSan: URI_BUNDLE }, destinations, allowAddressClasses: ['loopback'] },
    ],
  });
  for (const l of sluice.app.listeners) ports[l.name] = Number(l.address.slice(l.address.lastIndexOf(':') + 1));
});

afterAll(async () => {
  await sluice?.close();
  await echo?.close();
  pki?.cleanup();
});

const target = (): string => `127.0.0.1:${echo.port}`;
const connectHead = (headers: Record<string, string> = {}): string =>
  `CONNECT ${target()} HTTP/1.1\r\nHost: ${target()}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
const clientOf = (cert: IssuedCertificate): tls.ConnectionOptions => ({ cert: cert.certPem, key: cert.keyPem });

interface Attempt {
  /** The client finished its side of the handshake (in TLS 1.3 the server judges its certificate after that). */
  readonly secured: boolean;
  /** The status of Sluice's answer to `request`, or null when none came before the connection ended. */
  readonly status: number | null;
  readonly headers: Record<string, string>;
  readonly closed: boolean;
  readonly socket: tls.TLSSocket;
}

/**
 * Handshakes with a listener (on a fresh connection, or over `options.socket`) and writes `request` once
 * secure; resolves with the answer head (a 200 leaves the tunnel open) or the close, within `timeoutMs`.
 */
function attempt(port: number, options: tls.ConnectionOptions, request: string, timeoutMs = 3000): Promise<Attempt> {
  return new Promise<Attempt>((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: pki.serverCa.certPem, ...options });
    let secured = false;
    let data = Buffer.alloc(0);
    const finish = (status: number | null, headers: Record<string, string>, closed: boolean): void => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      resolve({ secured, status, headers, closed, socket });
    };
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`attempt on ${port}: neither an answer nor a close within ${timeoutMs} ms`));
    }, timeoutMs);
    const onData = (chunk: Buffer): void => {
      data = Buffer.concat([data, chunk]);
      const head = parseResponseHead(data);
      if (head !== null) finish(head.status, head.headers, false);
    };
    const onClose = (): void => finish(null, {}, true);
    socket.on('error', () => undefined);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('secureConnect', () => {
      secured = true;
      socket.write(request);
    });
  });
}

/** The decision records from index `from` on, once there are `count` of them (bounded). */
async function decisionsSince(from: number, count = 1): Promise<DecisionRecordV1[]> {
  await waitUntil(() => sluice.decisions().length >= from + count, { timeoutMs: 3000, label: `${count} decision record(s)` });
  return sluice.decisions().slice(from);
}

describe('a handshake on an identify: certificate listener', () => {
  it('a certificate from the client CA that a grant names tunnels as that grant (the control for what follows)', async () => {
    const from = sluice.decisions().length;
    const a = await attempt(ports['cert']!, clientOf(pki.agentA), connectHead());
    expect(a.status).toBe(200);
    expect(await roundTrip(a.socket, 'ping-a')).toBe('ping-a');
    a.socket.destroy();
    expect(await decisionsSince(from)).toMatchObject([{ listener: 'cert', decision: 'allow', reason: 'granted', principal: 'A', via: 'certificate' }]);
  });

  // Every refused certificate but the missing one carries grant A's URI SAN: only the chain check stands
  // between it and grant A.
  const refused: [string, () => IssuedCertificate | null, RegExp][] = [
    ['no certificate', () => null, /PEER_DID_NOT_RETURN_A_CERTIFICATE|CERTIFICATE_REQUIRED/],
    ['a certificate from another CA (same URI SAN)', () => pki.foreign, /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/],
    ['an expired certificate', () => pki.expired, /CERT_HAS_EXPIRED/],
    ['a certificate not yet valid', () => pki.notYetValid, /CERT_NOT_YET_VALID/],
    ['a certificate the CRL revokes', () => pki.revoked, /CERT_REVOKED/],
  ];
  const cases = refused.flatMap(([name, cert, detail]) => (['TLSv1.2', 'TLSv1.3'] as const).map((version) => [name, version, cert, detail] as const));

  it.each(cases)('%s over %s: the handshake fails (tls_handshake_failed, OpenSSL code in detail), nothing is served', async (_name, version, cert, detail) => {
    const from = sluice.decisions().length;
    const connections = echo.connections;
    const presented = cert();
    const a = await attempt(ports['cert']!, { maxVersion: version, ...(presented === null ? {} : clientOf(presented)) }, connectHead());
    expect(a.status).toBeNull();
    expect(a.closed).toBe(true);
    const records = await decisionsSince(from);
    expect(records).toMatchObject([{ listener: 'cert', decision: 'deny', reason: 'tls_handshake_failed', principal: null }]);
    expect(records[0]?.detail).toMatch(detail);
    expect(echo.connections).toBe(connections);
  });
});

// Clients keep TLS sessions (undici, curl, Node's agents offer the saved one on every new connection): a
// resumed session must work, and must be the principal of its full handshake, never another's.
describe('session resumption on a certificate listener', () => {
  it('a resumed session tunnels as the grant of its full handshake, and each connection is recorded as that grant', async () => {
    const from = sluice.decisions().length;
    const first = await attempt(ports['cert']!, { ...clientOf(pki.agentA), maxVersion: 'TLSv1.2' }, connectHead());
    expect(first.status).toBe(200);
    const session = first.socket.getSession();
    first.socket.destroy();
    expect(session).toBeDefined();
    // Resumed by session id (TLS 1.2): the server must accept it, not fail with an internal error.
    const resumed = await attempt(ports['cert']!, { ...clientOf(pki.agentA), maxVersion: 'TLSv1.2', session }, connectHead());
    expect(resumed.socket.isSessionReused()).toBe(true);
    expect(resumed.status).toBe(200);
    expect(await roundTrip(resumed.socket, 'resumed')).toBe('resumed');
    resumed.socket.destroy();
    // A session of grant A offered with grant B's certificate: a resumed session carries A's verified
    // certificate (holding A's session secret is holding A's key), a full handshake B's: never a mix.
    const crossed = await attempt(ports['cert']!, { ...clientOf(pki.agentB), maxVersion: 'TLSv1.2', session }, connectHead());
    const crossedReused = crossed.socket.isSessionReused();
    crossed.socket.destroy();
    const records = await decisionsSince(from, 3);
    expect(records.slice(0, 2)).toMatchObject([
      { listener: 'cert', reason: 'granted', principal: 'A', via: 'certificate' },
      { listener: 'cert', reason: 'granted', principal: 'A', via: 'certificate' },
    ]);
    const third = records[2];
    expect(third?.principal === 'A' || third?.principal === 'B').toBe(true);
    expect(third?.principal).toBe(crossedReused ? 'A' : 'B');
  });
});

// Node verifies with CRL_CHECK | CRL_CHECK_ALL once a CRL is set: every CA of the bundle needs its CRL,
// and a crlFile holding several must have all of them read, not just the first PEM block.
describe('a client CA bundle with one CRL per CA (a CA rotation overlaps two CAs)', () => {
  const bundleCases: [string, () => IssuedCertificate, string | null, RegExp | null][] = [
    ["the first CA's certificate", () => pki.agentA, 'A', null],
    ["the second CA's certificate", () => secondCa.valid, 'second-ca', null],
    ["a certificate the first CA's CRL revokes", () => pki.revoked, null, /CERT_REVOKED/],
    ["a certificate the second CA's CRL revokes", () => secondCa.revoked, null, /CERT_REVOKED/],
  ];
  it.each(bundleCases)('%s', async (_name, cert, principal, detail) => {
    const from = sluice.decisions().length;
    const a = await attempt(ports['bundle']!, clientOf(cert()), connectHead());
    a.socket.destroy();
    const [record] = await decisionsSince(from);
    if (principal !== null) {
      expect(a.status).toBe(200);
      expect(record).toMatchObject({ listener: 'bundle', reason: 'granted', principal, via: 'certificate' });
    } else {
      expect(a.status).toBeNull();
      expect(record).toMatchObject({ listener: 'bundle', reason: 'tls_handshake_failed', principal: null });
      expect(record?.detail).toMatch(detail ?? /./);
    }
  });
});

describe('a verified certificate is a principal only through a grant that names it', () => {
  it('a valid certificate no grant names (its CN is a grant id) is refused 403 certificate_not_granted on every hop', async () => {
    const from = sluice.decisions().length;
    const connections = echo.connections;
    const a = await attempt(ports['cert']!, clientOf(pki.noSan), connectHead());
    a.socket.destroy();
    expect(a.status).toBe(403);
    expect(a.headers['proxy-status']).toContain('details="certificate_not_granted"');
    expect(await decisionsSince(from)).toMatchObject([{ listener: 'cert', decision: 'deny', reason: 'certificate_not_granted', principal: null }]);
    expect(echo.connections).toBe(connections);
  });

  it("grant A's certificate with grant B's valid token: 407 token_invalid on the wire, token_grant_mismatch in the audit, never B", async () => {
    const from = sluice.decisions().length;
    const connections = echo.connections;
    const a = await attempt(ports['cert']!, clientOf(pki.agentA), connectHead({ 'Proxy-Authorization': `Bearer ${TOKEN_B}` }));
    a.socket.destroy();
    expect(a.status).toBe(407);
    expect(a.headers['proxy-status']).toContain('details="token_invalid"');
    const records = await decisionsSince(from);
    expect(records).toMatchObject([{ listener: 'cert', decision: 'deny', reason: 'token_grant_mismatch' }]);
    expect(records.map((r) => r.principal)).not.toContain('B');
    expect(JSON.stringify(sluice.records)).not.toContain(TOKEN_B);
    expect(echo.connections).toBe(connections);
  });

  it("grant A's certificate with grant A's own token is grant A", async () => {
    const from = sluice.decisions().length;
    const a = await attempt(ports['cert']!, clientOf(pki.agentA), connectHead({ 'Proxy-Authorization': `Bearer ${TOKEN_A}` }));
    expect(a.status).toBe(200);
    expect(await roundTrip(a.socket, 'own-token')).toBe('own-token');
    a.socket.destroy();
    expect(await decisionsSince(from)).toMatchObject([{ reason: 'granted', principal: 'A', via: 'certificate' }]);
  });
});

describe('downgrade and renegotiation', () => {
  it('a TLS 1.2 client-initiated renegotiation is refused, and nothing is served on that connection after it', async () => {
    const from = sluice.decisions().length;
    const connections = echo.connections;
    const socket = tls.connect({ host: '127.0.0.1', port: ports['cert']!, ca: pki.serverCa.certPem, maxVersion: 'TLSv1.2', ...clientOf(pki.agentA) });
    const closed = waitForClose(socket, 5000);
    await withTimeout(new Promise((resolve) => socket.once('secureConnect', resolve)), 3000, 'the first handshake');
    expect(socket.getProtocol()).toBe('TLSv1.2');
    const refusedRenegotiation = new Promise<string>((resolve) => {
      socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    expect(socket.renegotiate({}, () => undefined)).toBe(true);
    expect(await withTimeout(refusedRenegotiation, 3000, 'the renegotiation refused')).toBe('ERR_SSL_NO_RENEGOTIATION');
    const answers: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => answers.push(chunk));
    if (!socket.destroyed) socket.write(connectHead());
    await closed;
    expect(Buffer.concat(answers).toString('latin1')).not.toMatch(/^HTTP\/1\.1 200/);
    expect(sluice.decisions().slice(from).filter((d) => d.decision === 'allow')).toEqual([]);
    expect(echo.connections).toBe(connections);
  });

  it('minVersion TLSv1.3 refuses a TLS 1.2-only client (tls_handshake_failed) and serves a TLS 1.3 one', async () => {
    const from = sluice.decisions().length;
    const old = await attempt(ports['token13']!, { maxVersion: 'TLSv1.2' }, connectHead({ 'Proxy-Authorization': `Bearer ${TOKEN_A}` }));
    expect(old.secured).toBe(false);
    expect(old.status).toBeNull();
    const records = await decisionsSince(from);
    expect(records).toMatchObject([{ listener: 'token13', decision: 'deny', reason: 'tls_handshake_failed', principal: null }]);
    expect(records[0]?.detail).toMatch(/PROTOCOL|VERSION/i);
    const current = await attempt(ports['token13']!, {}, connectHead({ 'Proxy-Authorization': `Bearer ${TOKEN_A}` }));
    const protocol = current.socket.getProtocol();
    current.socket.destroy();
    expect(current.status).toBe(200);
    expect(protocol).toBe('TLSv1.3');
  });
});

describe('what is not a TLS handshake', () => {
  it('a plain-text CONNECT to a TLS listener is answered 400 tls_required in plain text', async () => {
    const from = sluice.decisions().length;
    const connections = echo.connections;
    const res = await rawRequest(ports['token12']!, connectHead({ 'Proxy-Authorization': `Bearer ${TOKEN_A}` }));
    expect(res.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(parseResponseHead(res.data)?.headers['proxy-status']).toContain('details="tls_required"');
    expect(await decisionsSince(from)).toMatchObject([{ listener: 'token12', decision: 'deny', reason: 'tls_required', principal: null }]);
    expect(echo.connections).toBe(connections);
  });

  // A TLS record header announcing a 512-byte ClientHello, then only its first bytes.
  const halfClientHello = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]), Buffer.alloc(32, 7)]);
  const stalls: [string, Buffer | null][] = [
    ['sends nothing', null],
    ['sends half a ClientHello', halfClientHello],
  ];

  it.each(stalls)('a client that connects and %s is closed within timeouts.headersMs (tls_handshake_failed)', async (_name, bytes) => {
    const from = sluice.decisions().length;
    // Measured from before the connect: Sluice's clock starts at accept, which comes after it.
    const startedMs = Date.now();
    const socket = net.connect(ports['cert']!, '127.0.0.1');
    const closed = waitForClose(socket, HEADERS_MS + 2000);
    await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 2000, 'connect');
    if (bytes !== null) socket.write(bytes);
    await closed;
    const elapsedMs = Date.now() - startedMs;
    expect(elapsedMs).toBeGreaterThanOrEqual(HEADERS_MS - 5);
    expect(elapsedMs).toBeLessThan(HEADERS_MS + 1500);
    expect(await decisionsSince(from)).toMatchObject([{ listener: 'cert', decision: 'deny', reason: 'tls_handshake_failed', principal: null }]);
  });
});

describe('revocation and the PROXY protocol', () => {
  it("revoking a run-time grant named by a certificate ends that certificate's live tunnel, and its next hop finds no grant", async () => {
    const uri = 'spiffe://sluice.test/runtime';
    const cert = pki.issue(pki.clientCa, 'runtime', { uris: [uri] });
    const issued = await sluice.app.control.issueGrant({ clientCertificate: { uriSan: uri }, destinations: [`tcp://${target()}`], allowAddressClasses: ['loopback'] });
    if (!issued.ok) throw new Error(`issue: ${JSON.stringify(issued)}`);
    const id = issued.value.id;
    const a = await attempt(ports['cert']!, clientOf(cert), connectHead());
    expect(a.status).toBe(200);
    expect(await roundTrip(a.socket, 'before revoke')).toBe('before revoke');
    const ended = waitForClose(a.socket, 3000);
    expect(await sluice.app.control.revokeGrant(id)).toMatchObject({ ok: true, value: { endedConnections: 1 } });
    // A reset of the TCP socket under the TLS one: nothing the kernel still holds reaches the client.
    expect(await ended).toBe('ECONNRESET');
    await waitUntil(() => sluice.closes().some((c) => c.principal === id), { timeoutMs: 3000, label: 'the close record' });
    expect(sluice.closes().find((c) => c.principal === id)).toMatchObject({ closedBy: 'revoked' });

    const from = sluice.decisions().length;
    const again = await attempt(ports['cert']!, clientOf(cert), connectHead());
    again.socket.destroy();
    expect(again.status).toBe(403);
    expect(await decisionsSince(from)).toMatchObject([{ reason: 'certificate_not_granted', principal: null }]);
  });

  it('a PROXY v2 header before the ClientHello: the handshake follows it and the audit source is the carried address', async () => {
    const SIG = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
    const addresses = Buffer.from([198, 51, 100, 7, 127, 0, 0, 1, 0x15, 0xb3, 0x0c, 0x38]); // 198.51.100.7:5555 → 127.0.0.1:3128
    const header = Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0x00, 0x0c]), addresses]);
    const raw = net.connect(ports['lb']!, '127.0.0.1');
    await withTimeout(new Promise((resolve) => raw.once('connect', resolve)), 2000, 'connect');
    raw.write(header);
    const from = sluice.decisions().length;
    const a = await attempt(ports['lb']!, { socket: raw, ...clientOf(pki.agentA) }, connectHead());
    expect(a.status).toBe(200);
    expect(await roundTrip(a.socket, 'via lb')).toBe('via lb');
    a.socket.destroy();
    expect(await decisionsSince(from)).toMatchObject([{ listener: 'lb', reason: 'granted', principal: 'A', via: 'certificate', source: '198.51.100.7' }]);
  });
});

// ---------------------------------------------------------------------------------------------------
// Rotation: an app started from a file, so that a reload reads new files at the same paths.

interface FileApp {
  readonly app: SluiceApp;
  readonly port: number;
  readonly records: AuditRecordV1[];
  readonly files: { certFile: string; keyFile: string; clientCaFile: string };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function startFromFile(): Promise<FileApp> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-tls-reload-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = { certFile: path.join(dir, 'server.pem'), keyFile: path.join(dir, 'server.key'), clientCaFile: path.join(dir, 'client-ca.pem') };
  fs.copyFileSync(pki.server.certFile, files.certFile);
  fs.copyFileSync(pki.server.keyFile, files.keyFile);
  fs.copyFileSync(pki.clientCa.certFile, files.clientCaFile);
  const file = path.join(dir, 'sluice.yaml');
  const destinations = [`tcp://${target()}`];
  fs.writeFileSync(file, stringify({
    listeners: [{ name: 'rotating', listen: '127.0.0.1:0', identify: 'certificate', tls: files }],
    state: path.join(dir, 'state'),
    timeouts: { headersMs: 2000 },
    grants: [
      { id: 'old-ca', clientCertificate: { uriSan: URI_A }, destinations, allowAddressClasses: ['loopback'] },
      { id: 'new-ca', clientCertificate: { uriSan: URI_NEW_CA }, destinations, allowAddressClasses: ['loopback'] },
    ],
  }));
  const loaded = await loadConfig(file, dir);
  if (!loaded.ok) throw new Error(`config: ${JSON.stringify(loaded.issues)}`);
  const records: AuditRecordV1[] = [];
  const app = await startApp(loaded.config, { env: {}, cwd: dir, uid: OWN_UID, log: silentLog, audit: { write: (r) => void records.push(r), flush: () => Promise.resolve() } });
  cleanups.push(() => app.close());
  const address = app.listeners[0]?.address ?? '';
  return { app, port: Number(address.slice(address.lastIndexOf(':') + 1)), records, files };
}

describe('rotation without restart', () => {
  let underNewCa: IssuedCertificate;
  beforeAll(() => {
    underNewCa = pki.issue(pki.otherCa, 'under-new-ca', { uris: [URI_NEW_CA] });
  });

  it('a reload that swaps the client CA keeps the tunnel made under the old one; new handshakes follow the new CA', async () => {
    const s = await startFromFile();
    const live = await attempt(s.port, clientOf(pki.agentA), connectHead());
    cleanups.push(() => void live.socket.destroy());
    expect(live.status).toBe(200);
    expect(await roundTrip(live.socket, 'under the old CA')).toBe('under the old CA');

    fs.copyFileSync(pki.otherCa.certFile, s.files.clientCaFile);
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { listeners: { changed: [], tlsReloaded: ['rotating'] } } });
    expect(await roundTrip(live.socket, 'after the swap')).toBe('after the swap');

    const from = s.records.length;
    const old = await attempt(s.port, clientOf(pki.agentA), connectHead());
    old.socket.destroy();
    expect(old.status).toBeNull();
    const fresh = await attempt(s.port, clientOf(underNewCa), connectHead());
    fresh.socket.destroy();
    expect(fresh.status).toBe(200);
    await waitUntil(() => s.records.filter((r) => r.kind === 'decision').length >= 2, { timeoutMs: 3000, label: 'two decisions' });
    const decisions = s.records.slice(from).filter((r): r is DecisionRecordV1 => r.kind === 'decision');
    expect(decisions).toMatchObject([
      { reason: 'tls_handshake_failed', principal: null },
      { reason: 'granted', principal: 'new-ca', via: 'certificate' },
    ]);
    expect(decisions[0]?.detail).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/);
    expect(await roundTrip(live.socket, 'still')).toBe('still');
  });

  it('a reload whose key does not match the certificate is refused naming listeners[0].tls.keyFile; the old context still serves', async () => {
    const s = await startFromFile();
    fs.copyFileSync(pki.strayKeyFile, s.files.keyFile);
    const refused = await s.app.control.reload();
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.issues.map((i) => i.path)).toEqual(['listeners[0].tls.keyFile']);
    const a = await attempt(s.port, clientOf(pki.agentA), connectHead());
    const served = a.socket.getPeerX509Certificate();
    a.socket.destroy();
    expect(a.status).toBe(200);
    expect(served?.fingerprint256.replaceAll(':', '').toLowerCase()).toBe(pki.server.sha256);
  });
});

describe('a file set that does not load', () => {
  function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SLUICE_ADMIN_TOKEN: '' } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`sluice ${args[0] ?? ''} did not exit within 15 s; stderr: ${stderr}`));
      }, 15_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });
  }

  it('start and check-config exit 2 naming listeners[0].tls.certFile when the certificate file is missing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-tls-missing-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'sluice.yaml');
    fs.writeFileSync(file, stringify({
      listeners: [{ name: 'tls', listen: '127.0.0.1:0', identify: 'token', tls: { certFile: path.join(dir, 'absent.pem'), keyFile: pki.server.keyFile } }],
      state: path.join(dir, 'state'),
      audit: { file: 'stderr' },
    }));
    const [checked, started] = await Promise.all([run(['check-config', file]), run(['start', '--config', file])]);
    expect(checked.code).toBe(2);
    expect(checked.stderr).toContain('listeners[0].tls.certFile');
    expect(started.code).toBe(2);
    expect(started.stderr).toContain('listeners[0].tls.certFile');
    expect(started.stderr).not.toContain('"msg":"listening"');
  });
});
