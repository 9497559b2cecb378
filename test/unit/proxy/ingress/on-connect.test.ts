// onConnect (src/proxy/ingress/on-connect.ts): one HTTP CONNECT, from the fast path (connect-head.ts) or from
// node:http, identified, canonicalized and run through the tunnel stages by runHop. What a hostile client
// tries: a CONNECT without or with a wrong token, another grant's live token on a dedicated listener (an
// oracle for live tokens), a target with a path or userinfo, tunnel bytes sent with the CONNECT head in the
// hope that they reach the origin before the decision, and its own Proxy-Authorization forwarded to the
// origin. Every case checks that each hop leaves exactly one decision record, and that what the client is
// told (status, Proxy-Status, body) is read from that record. A real in-process Sluice (startSluice) and
// raw sockets on 127.0.0.1.
import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyStatus, Reasons, sentReason } from '../../../../src/core/index.js';
import { denialBody } from '../../../../src/proxy/ingress/respond.js';
import { parseResponseHead, rawRequest, type ParsedHead } from '../../../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../../../support/sluice.js';
import { waitFor, waitUntil } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const TOKEN_A = 'token-a-0123456789abcdef';
const TOKEN_B = 'token-b-0123456789abcdef';
const basic = (id: string, token: string): string => `Basic ${Buffer.from(`${id}:${token}`).toString('base64')}`;

/** An origin that echoes and keeps every byte it receives. */
let origin: { port: number; server: net.Server; received: Buffer[]; accepted: number };
let sluice: TestSluice;
let dedicatedPort: number;

beforeAll(async () => {
  const received: Buffer[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    origin.accepted += 1;
    socket.on('error', () => undefined);
    socket.on('data', (c: Buffer) => received.push(c));
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = { port: (server.address() as net.AddressInfo).port, server, received, accepted: 0 };
  sluice = await startSluice(
    {
      listeners: [
        { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
        { name: 'only-a', listen: '127.0.0.1:0', grant: 'a' },
      ],
      grants: [
        { id: 'a', tokenSha256: tokenHash(TOKEN_A), destinations: [`https://a.test:${origin.port}`], allowAddressClasses: ['loopback'] },
        { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`https://b.test:${origin.port}`], allowAddressClasses: ['loopback'] },
      ],
    },
    { lookup: tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] }) },
  );
  const dedicated = sluice.app.listeners.find((l) => l.name === 'only-a');
  dedicatedPort = Number(dedicated?.address.split(':').at(-1));
});

afterAll(async () => {
  await sluice?.close();
  await new Promise<void>((resolve) => origin?.server.close(() => resolve()));
});

beforeEach(() => {
  sluice.records.length = 0;
  origin.received.length = 0;
  origin.accepted = 0;
});

/** Sends `head` (plus any early bytes) as one write and reads the whole answer until Sluice closes. */
async function refusedConnect(data: string, port = sluice.port): Promise<{ head: ParsedHead; body: string }> {
  const answer = await rawRequest(port, data, { untilClose: true, timeoutMs: TIMEOUT_MS });
  expect(answer.closed).toBe(true);
  const head = parseResponseHead(answer.data);
  if (head === null) throw new Error(`no response head: ${JSON.stringify(answer.text)}`);
  return { head, body: answer.data.subarray(head.headLength).toString('utf8') };
}

/** The answer must be read from the hop's one decision record. */
function expectAnsweredFromDecision(answer: { head: ParsedHead; body: string }, reason: string): void {
  expect(sluice.decisions()).toHaveLength(1);
  const decision = sluice.decisions()[0];
  if (decision === undefined) return;
  expect(decision.reason).toBe(reason);
  const sent = sentReason(decision.reason);
  expect(answer.head.status).toBe(Reasons[sent].status);
  expect(answer.head.headers['proxy-status']).toBe(proxyStatus(sent));
  expect(answer.body).toBe(denialBody(decision));
  expect(answer.head.headers['connection']).toBe('close');
}

const connect = (target: string, headers: Record<string, string> = {}, version = '1.1'): string =>
  `CONNECT ${target} HTTP/${version}\r\nHost: ${target}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;

describe('onConnect: identification', () => {
  it.each([
    ['no Proxy-Authorization', {}, 'token_missing'],
    ['a wrong token', { 'Proxy-Authorization': basic('a', 'guess') }, 'token_invalid'],
    ['grant b’s token under grant a’s id', { 'Proxy-Authorization': basic('a', TOKEN_B) }, 'token_invalid'],
  ])('refuses %s with 407, one decision, and the origin never dialed', async (_label, headers, reason) => {
    const answer = await refusedConnect(connect(`a.test:${origin.port}`, headers));
    expectAnsweredFromDecision(answer, reason);
    expect(answer.head.headers['proxy-authenticate']).toBe('Basic realm="sluice"');
    expect(origin.accepted).toBe(0);
  });

  it('answers another grant’s live token on a dedicated listener exactly like a wrong token (no oracle)', async () => {
    const mismatch = await refusedConnect(connect(`a.test:${origin.port}`, { 'Proxy-Authorization': basic('b', TOKEN_B) }), dedicatedPort);
    expect(sluice.decisions()).toMatchObject([{ reason: 'token_grant_mismatch', status: 407 }]);
    expectAnsweredFromDecision(mismatch, 'token_grant_mismatch');
    sluice.records.length = 0;
    const wrong = await refusedConnect(connect(`a.test:${origin.port}`, { 'Proxy-Authorization': basic('a', 'guess') }), dedicatedPort);
    expect(mismatch.head.head).toBe(wrong.head.head);
    expect(mismatch.body).toBe(wrong.body);
    expect(mismatch.body).not.toContain('mismatch');
  });

  it('on a dedicated listener acts for its grant without any token', async () => {
    const socket = net.connect(dedicatedPort, '127.0.0.1');
    socket.on('error', () => undefined);
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.write(connect(`a.test:${origin.port}`));
    await waitUntil(() => data.includes('\r\n\r\n'), { timeoutMs: TIMEOUT_MS, label: 'the 200' });
    expect(parseResponseHead(Buffer.from(data, 'latin1'))?.status).toBe(200);
    socket.destroy();
    expect(sluice.decisions()).toMatchObject([{ principal: 'a', via: 'listener', reason: 'granted' }]);
  });
});

describe('onConnect: target and authorization', () => {
  it.each([
    ['another grant’s destination', 'b.test:PORT', 'destination_not_granted'],
    ['a path in the target', 'a.test:443/x', 'destination_malformed'],
    ['userinfo in the target', 'user@a.test:443', 'destination_malformed'],
    ['no port', 'a.test', 'destination_malformed'],
  ])('refuses %s, answered from its one decision', async (_label, rawTarget, reason) => {
    const target = rawTarget.replace('PORT', String(origin.port));
    const answer = await refusedConnect(connect(target, { 'Proxy-Authorization': basic('a', TOKEN_A) }));
    expectAnsweredFromDecision(answer, reason);
    expect(origin.accepted).toBe(0);
  });

  it('holds tunnel bytes sent with a refused CONNECT head: not one reaches the origin', async () => {
    const early = 'GET / HTTP/1.1\r\nHost: b.test\r\n\r\n';
    const answer = await refusedConnect(connect(`b.test:${origin.port}`, { 'Proxy-Authorization': basic('a', TOKEN_A) }) + early);
    expectAnsweredFromDecision(answer, 'destination_not_granted');
    expect(origin.accepted).toBe(0);
  });

  it('decides the same whether the fast path or node:http parsed the head', async () => {
    // A Content-Length field takes a CONNECT off the fast path (connect-head.ts): node:http parses it.
    const viaHttp = await refusedConnect(connect(`b.test:${origin.port}`, { 'Proxy-Authorization': basic('a', TOKEN_A), 'Content-Length': '0' }));
    const slowDecision = sluice.decisions()[0];
    sluice.records.length = 0;
    const viaFast = await refusedConnect(connect(`b.test:${origin.port}`, { 'Proxy-Authorization': basic('a', TOKEN_A) }));
    expect(sluice.decisions()).toHaveLength(1);
    expect(slowDecision).toMatchObject({ reason: 'destination_not_granted', principal: 'a', canonical: `b.test:${origin.port}` });
    expect(viaHttp.head.headers['proxy-status']).toBe(viaFast.head.headers['proxy-status']);
    expect(viaHttp.body).toBe(viaFast.body);
  });
});

describe('onConnect: an allowed tunnel', () => {
  it('answers 200 with Proxy-Status granted, relays early bytes, never forwards Proxy-Authorization, and records one decision then one close', async () => {
    const socket = net.connect(sluice.port, '127.0.0.1');
    socket.on('error', () => undefined);
    let data = Buffer.alloc(0);
    socket.on('data', (c: Buffer) => (data = Buffer.concat([data, c])));
    await waitFor(socket, 'connect');
    socket.write(connect(`a.test:${origin.port}`, { 'Proxy-Authorization': basic('a', TOKEN_A) }) + 'early|');
    await waitUntil(() => data.includes('early|'), { timeoutMs: TIMEOUT_MS, label: 'the echo of the early bytes' });
    const head = parseResponseHead(data);
    expect(head?.status).toBe(200);
    expect(head?.headers['proxy-status']).toBe('sluice; details="granted"');
    socket.write('later');
    await waitUntil(() => data.includes('later'), { timeoutMs: TIMEOUT_MS, label: 'the echo of later bytes' });
    const closed = waitFor(socket, 'close');
    socket.end();
    await closed;
    await waitUntil(() => sluice.closes().length === 1, { timeoutMs: TIMEOUT_MS, label: 'the close record' });
    // The origin saw the tunnel bytes and nothing of the CONNECT head: no token, no Host.
    expect(Buffer.concat(origin.received).toString('latin1')).toBe('early|later');
    expect(sluice.decisions()).toMatchObject([{ reason: 'granted', principal: 'a', via: 'token', request: 'connect', canonical: `a.test:${origin.port}`, pinned: '127.0.0.1' }]);
    expect(sluice.closes()).toMatchObject([{ bytesUp: 11, bytesDown: 11, closedBy: 'client_closed' }]);
    expect(JSON.stringify(sluice.records)).not.toContain(TOKEN_A);
  });
});
