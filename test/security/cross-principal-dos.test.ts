// Threat: one principal denies service to every other principal through a resource Sluice shares between
// them (CWE-400 uncontrolled resource consumption, CWE-770 allocation without limits or throttling;
// security review 2026-12 findings 7 and 15, issue 13). Each attack below is the review's, run in-process:
// - DNS (finding 7): a principal with a wildcard grant opens 600 CONNECTs to names whose DNS never answers.
//   Before, they held all 512 process-wide lookup slots (limits.maxConcurrentLookups) for dns.timeoutMs, and
//   every other principal's lookup failed 502 dns_busy. Now one grant holds at most
//   limits.maxConcurrentLookupsPerGrant (64) lookups; its next ones are its own 429 lookup_limit_reached.
// - PAC (finding 15): a principal keeps the one serial PAC queue full of uncached names that are slow to
//   evaluate. Before, other principals' hops got pac_failed ("too many PAC evaluations are waiting") or
//   waited behind the whole queue. Now one grant queues at most limits.maxPacWaitingPerGrant evaluations
//   (its next ones are 429 pac_limit_reached) and the queue serves grants in turn.
// - Auth throttle (issue 13 c, roadmap item 4): a principal guesses tokens from 127.0.0.1, where every
//   token client arrives from. Before, the throttle was keyed by source address alone, so the guesses
//   locked token authentication out for every principal on that address. Now failures count per
//   presented grant id, under a per-source ceiling much higher than one grant id's limit.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type SluiceApp } from '../../src/app.js';
import type { DecisionRecordV1 } from '../../src/audit/index.js';
import { parseConfigText } from '../../src/config/index.js';
import type { LookupAll } from '../../src/core/index.js';
import { startDnsFixture, type DnsFixture } from '../support/fault-servers.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, roundTrip, type ConnectTunnel } from '../support/raw-client.js';
import { OWN_UID, silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const ATTACKER = { 'Proxy-Authorization': `Basic ${Buffer.from('attacker:tok-att').toString('base64')}` };
const VICTIM = { 'Proxy-Authorization': `Basic ${Buffer.from('victim:tok-vic').toString('base64')}` };
const FLOOD = 600;
const PER_GRANT_LOOKUPS = 64; // the default of limits.maxConcurrentLookupsPerGrant

function grants(echoPort: number, victimHosts: string): Record<string, unknown>[] {
  return [
    { id: 'attacker', tokenSha256: tokenHash('tok-att'), destinations: ['https://*.slow.test'] },
    { id: 'victim', tokenSha256: tokenHash('tok-vic'), allowAddressClasses: ['loopback'], destinations: [`tcp://${victimHosts}:${echoPort}`] },
  ];
}

/** Never answers on its own: rejects only when the resolver's signal aborts (the LookupAll contract). */
const blackhole = (signal: AbortSignal): Promise<never> =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));

const statuses = (tunnels: readonly ConnectTunnel[]): number[] => tunnels.map((t) => t.status);
const detailsOf = (t: ConnectTunnel): string => /details="([a-z_]+)"/.exec(t.head)?.[1] ?? '';

/** Sluice with no injected lookup: dns.servers reach node:dns for real, as in the review. */
async function startWithRealDns(config: Record<string, unknown>): Promise<{ app: SluiceApp; port: number; decisions: DecisionRecordV1[]; close(): Promise<void> }> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-dos-'));
  const text = stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], state: stateDir, ...config });
  const parsed = parseConfigText(text, path.join(stateDir, 'sluice.yaml'), stateDir);
  if (!parsed.ok) throw new Error(parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; '));
  const decisions: DecisionRecordV1[] = [];
  const audit = { write: (r: { kind: string }) => void (r.kind === 'decision' && decisions.push(r as DecisionRecordV1)), flush: () => Promise.resolve() };
  const app = await startApp(parsed.config, { env: {}, cwd: stateDir, uid: OWN_UID, audit, log: silentLog });
  const address = app.listeners[0]?.address ?? '';
  return {
    app,
    port: Number(address.slice(address.lastIndexOf(':') + 1)),
    decisions,
    close: async () => {
      await app.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

function closeAll(tunnels: readonly (ConnectTunnel | null)[]): void {
  for (const t of tunnels) t?.socket.destroy();
}

/** A flood CONNECT: null when Sluice closed it unanswered (at shutdown, after a failed assertion). */
const floodConnect = (port: number, target: string): Promise<ConnectTunnel | null> =>
  openConnectTunnel(port, target, ATTACKER, { timeoutMs: 15_000 }).catch(() => null);

describe('finding 7: one principal cannot take every DNS lookup slot (LookupAll that never answers)', () => {
  let echo: EchoServer;
  let sluice: TestSluice;
  const started = { slow: 0 };

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    const table = tableLookup({ 'b.test': ['127.0.0.1'] }); // TTL 0: every victim hop needs a lookup slot
    const lookup: LookupAll = (host, signal) => {
      if (host.endsWith('.slow.test')) {
        started.slow += 1;
        return blackhole(signal);
      }
      return table(host, signal);
    };
    sluice = await startSluice({ dns: { timeoutMs: 2500 }, grants: grants(echo.port, 'b.test') }, { lookup });
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  it('600 CONNECTs to never-answering names get their own 429 lookup_limit_reached while the other principal’s CONNECTs all succeed', async () => {
    const attackerDecisions = (): number => sluice.decisions().filter((d) => d.principal === 'attacker').length;
    const flood = Array.from({ length: FLOOD }, (_, i) => floodConnect(sluice.port, `n${i}x${Date.now().toString(36)}.slow.test:443`));
    // Every flood CONNECT is either answered already or holds a lookup: the slots are as full as they get.
    await waitUntil(() => started.slow + attackerDecisions() >= FLOOD, { timeoutMs: 10_000, label: 'flood in place' });

    const victim = await Promise.all(Array.from({ length: 5 }, () => openConnectTunnel(sluice.port, `b.test:${echo.port}`, VICTIM)));
    try {
      expect(victim.map(detailsOf)).toEqual(Array(5).fill('granted'));
      expect(statuses(victim)).toEqual([200, 200, 200, 200, 200]);
      expect(await roundTrip(victim[0]!.socket, 'ping')).toBe('ping');
    } finally {
      closeAll(victim);
    }

    // The flooder holds its share of lookups; everything past it was refused, to the flooder alone.
    expect(started.slow).toBe(PER_GRANT_LOOKUPS);
    const refused = sluice.decisions().filter((d) => d.principal === 'attacker' && d.reason === 'lookup_limit_reached');
    expect(refused).toHaveLength(FLOOD - PER_GRANT_LOOKUPS);
    expect(sluice.decisions().filter((d) => d.reason === 'dns_busy')).toEqual([]);
    expect(sluice.decisions().filter((d) => d.principal === 'victim').map((d) => d.reason)).toEqual(Array(5).fill('granted'));

    const answers = (await Promise.all(flood)).filter((t): t is ConnectTunnel => t !== null);
    closeAll(answers);
    expect(answers).toHaveLength(FLOOD);
    const limited = answers.filter((t) => t.status === 429);
    expect(limited).toHaveLength(FLOOD - PER_GRANT_LOOKUPS);
    expect(limited[0]!.head).toContain('Proxy-Status: sluice; error=http_request_denied; details="lookup_limit_reached"');
    expect(answers.filter((t) => t.status === 504 && detailsOf(t) === 'dns_timeout')).toHaveLength(PER_GRANT_LOOKUPS);
  });
});

describe('finding 7 through a real UDP DNS server that never answers *.slow.test (the review’s flood)', () => {
  let echo: EchoServer;
  let dns: DnsFixture;
  let sluice: Awaited<ReturnType<typeof startWithRealDns>>;
  const names = Array.from({ length: FLOOD }, (_, i) => `r${i}.slow.test`);

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    dns = await startDnsFixture({
      'b.test': { kind: 'address', addresses: ['127.0.0.1'], ttlSeconds: 0 },
      ...Object.fromEntries(names.map((n) => [n, { kind: 'drop' } as const])),
    });
    sluice = await startWithRealDns({ dns: { servers: [dns.server], timeoutMs: 2500 }, grants: grants(echo.port, 'b.test') });
  });
  afterAll(async () => {
    await sluice?.close();
    await dns?.close();
    await echo?.close();
  });

  it('the victim’s CONNECT during the flood is 200, not 502 dns_busy', async () => {
    const flood = names.map((n) => floodConnect(sluice.port, `${n}:443`));
    const asked = (): number => new Set(dns.queries.filter((q) => q.includes('.slow.test')).map((q) => q.split(' ')[0])).size;
    const attackerDecisions = (): number => sluice.decisions.filter((d) => d.principal === 'attacker').length;
    await waitUntil(() => asked() + attackerDecisions() >= FLOOD, { timeoutMs: 10_000, label: 'flood in place' });

    const victim = await openConnectTunnel(sluice.port, `b.test:${echo.port}`, VICTIM);
    try {
      expect(detailsOf(victim)).toBe('granted');
      expect(victim.status).toBe(200);
      expect(await roundTrip(victim.socket, 'ping')).toBe('ping');
    } finally {
      victim.socket.destroy();
    }
    expect(asked()).toBe(PER_GRANT_LOOKUPS);
    closeAll(await Promise.all(flood));
  });
});

describe('finding 15: one principal cannot fill the PAC evaluation queue of every other principal', () => {
  let echo: EchoServer;
  let sluice: TestSluice;
  let dir: string;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-dos-'));
    // Each flood name costs 25 ms of PAC time, well inside the PAC deadline: slow, never failing.
    const pac = `function FindProxyForURL(url, host) {
      if (dnsDomainIs(host, ".slow.test")) { var t = Date.now(); while (Date.now() - t < 25) {} }
      return "DIRECT";
    }`;
    fs.writeFileSync(path.join(dir, 'slow.pac'), pac);
    const victimNames = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`v${i}.b.test`, ['127.0.0.1']]));
    sluice = await startSluice(
      { route: { mode: 'pac', pac: { file: path.join(dir, 'slow.pac'), timeoutMs: 1000 } }, grants: grants(echo.port, '*.b.test') },
      // Flood names have no address (answered at once): only the PAC queue is under attack here.
      { lookup: tableLookup(victimNames) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a flood of uncached names gets its own 429 pac_limit_reached while the other principal’s PAC-routed CONNECTs all succeed promptly', async () => {
    // 300 attacker connections, each sending a fresh uncached name as soon as its last one is answered.
    let stop = false;
    let sent = 0;
    const answers: ConnectTunnel[] = [];
    const attacker = async (worker: number): Promise<void> => {
      for (let n = 0; !stop; n += 1) {
        sent += 1;
        const t = await openConnectTunnel(sluice.port, `w${worker}n${n}.slow.test:443`, ATTACKER, { timeoutMs: 20_000 }).catch(() => null);
        if (t === null) continue;
        t.socket.destroy();
        answers.push(t);
        if (t.status === 429) await new Promise((r) => setTimeout(r, 250)); // keep the test's own CPU use sane
      }
    };
    const workers = Array.from({ length: 300 }, (_, w) => attacker(w));
    try {
      await waitUntil(() => sent >= 300 && answers.length >= 50, { timeoutMs: 10_000, label: 'flood in place' });
      // Five names, each uncached, so each needs its own PAC evaluation while the flood goes on.
      for (let i = 0; i < 5; i += 1) {
        const begun = performance.now();
        const t = await openConnectTunnel(sluice.port, `v${i}.b.test:${echo.port}`, VICTIM, { timeoutMs: 10_000 });
        const ms = performance.now() - begun;
        t.socket.destroy();
        expect(detailsOf(t)).toBe('granted');
        expect(t.status).toBe(200);
        // Behind one flood call (25 ms) rather than the whole queue (256 × 25 ms); loose for a loaded machine.
        expect(ms).toBeLessThan(3000);
      }
    } finally {
      stop = true;
      await Promise.all(workers);
    }
    expect(answers.some((t) => t.status === 429 && t.head.includes('details="pac_limit_reached"'))).toBe(true);
    expect(answers.some((t) => detailsOf(t) === 'pac_failed')).toBe(false);
    expect(sluice.decisions().filter((d) => d.principal === 'victim').map((d) => d.reason)).toEqual(Array(5).fill('granted'));
  });
});

describe('issue 13 (c): one principal’s failed authentications do not lock out another principal', () => {
  let echo: EchoServer;
  let sluice: TestSluice;
  const LIMIT = 5;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    sluice = await startSluice({ limits: { authFailuresPerMinute: LIMIT }, grants: grants(echo.port, 'b.test') }, { lookup: tableLookup({ 'b.test': ['127.0.0.1'] }) });
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  const basic = (user: string, token: string): Record<string, string> => ({ 'Proxy-Authorization': `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}` });

  it('a guesser on 127.0.0.1 is throttled for the grant id it presents, and another principal on 127.0.0.1 with a valid token still gets through', async () => {
    for (let i = 0; i < LIMIT; i += 1) {
      const t = await openConnectTunnel(sluice.port, `b.test:${echo.port}`, basic('attacker', `guess-${i}`));
      expect([t.status, detailsOf(t)]).toEqual([407, 'token_invalid']);
    }
    const blocked = await openConnectTunnel(sluice.port, `b.test:${echo.port}`, basic('attacker', 'guess-next'));
    expect([blocked.status, detailsOf(blocked)]).toEqual([429, 'auth_rate_limited']);

    const victim = await openConnectTunnel(sluice.port, `b.test:${echo.port}`, VICTIM);
    try {
      expect(detailsOf(victim)).toBe('granted');
      expect(victim.status).toBe(200);
    } finally {
      victim.socket.destroy();
    }
    expect(sluice.decisions().at(-1)).toMatchObject({ principal: 'victim', reason: 'granted' });
  });
});
