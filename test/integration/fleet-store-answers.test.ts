// Admin writes across a Redis restart (issue 24, review 2026-12-04 finding 7): three `sluice start`
// children of the built CLI on one real redis-server. Redis is restarted on the same port (with its data,
// or wiped) while every instance is issued, rotated, revoked and forgotten grants through its admin API,
// concurrently. What must hold: every answer is 2xx or 503 `ledger_unavailable` (never 500, never
// anything else; a grant the wiped store lost is 404 `grant_not_found`, as it is gone); and once the
// instances have caught up, every 2xx is visible on every instance: an issued grant is listed and its
// token works, a revoked one is revoked, a rotated one's new token works and the old one does not
// (grace 0), a forgotten one is gone. A 503 issue leaves no grant behind; a 503 revoke or forget is
// retried by the instance until the store takes it, so it too ends up on every instance; a 503 rotation
// changed nothing. Every wait is bounded. Skipped only when redis-server is missing. Needs `npm run build`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { adminRequest, type AdminAnswer } from '../support/admin-socket.js';
import { redisSkip, startRedis, type TestRedis } from '../support/redis.js';
import { killSluiceProcesses, REPO_ROOT as ROOT, startSluiceProcess, type SluiceProcess } from '../support/sluice-process.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const MAX_STALE_MS = 500;
/** Operations of each kind (issue, rotate, revoke, forget) each instance is asked for at once. */
const EACH = 10;
const CATCH_UP_MS = 15_000;

interface Instance {
  readonly name: string;
  readonly adminSocket: string;
  proc: SluiceProcess | null;
  port: number;
}


function admin(on: Instance, method: string, route: string, body?: unknown): Promise<AdminAnswer> {
  return adminRequest(on.adminSocket, method, route, body, 10_000).catch((error: unknown) => {
    throw new Error(`${on.name}: ${(error as Error).message}`, { cause: error });
  });
}

type Kind = 'issue' | 'rotate' | 'revoke' | 'forget';

interface Outcome {
  readonly kind: Kind;
  readonly on: string;
  /** The grant acted on (for issue: the one issued, when 201). */
  readonly id: string | null;
  readonly status: number;
  readonly error: string | null;
  /** issue: the token; rotate: the new token. */
  readonly token: string | null;
  /** rotate: the token before. */
  readonly oldToken: string | null;
}

interface Grant {
  readonly id: string;
  readonly token: string;
}

/** Runs `tasks` with at most `width` at a time. */
async function limited<T>(width: number, tasks: readonly (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array<T>(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, tasks.length) }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]!();
      }
    }),
  );
  return out;
}

describe.skipIf(redisSkip())('fleet: admin writes across a Redis restart answer 2xx or 503 ledger_unavailable, and every 2xx reaches every instance', () => {
  let root: string;
  let echo: EchoServer;
  let redis: TestRedis | null = null;
  let caseNo = 0;

  beforeAll(async () => {
    if (!fs.existsSync(path.join(ROOT, 'dist/main.js'))) throw new Error('run `npm run build` first: this test starts the built CLI');
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-fleet-answers-'));
    echo = await startTcpEchoServer();
  });
  afterEach(async () => {
    await killSluiceProcesses();
    await redis?.stop();
    redis = null;
  });
  afterAll(async () => {
    await echo?.close();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  const spec = (): Record<string, unknown> => ({ destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] });

  async function startFleet(): Promise<Instance[]> {
    caseNo += 1;
    const caseDir = path.join(root, `case${caseNo}`);
    fs.mkdirSync(caseDir, { mode: 0o700 });
    redis = await startRedis();
    const fleet = ['a', 'b', 'c'].map((name): Instance => ({ name, adminSocket: path.join(caseDir, name, 'admin.sock'), proc: null, port: 0 }));
    await Promise.all(
      fleet.map(async (s) => {
        const home = path.join(caseDir, s.name);
        fs.mkdirSync(home, { mode: 0o700 });
        s.proc = await startSluiceProcess({
          name: s.name,
          cwd: home,
          config: {
            listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
            admin: { listen: `unix:${s.adminSocket}`, drainTimeoutMs: 2000 },
            state: path.join(home, 'state'),
            audit: { file: path.join(home, 'audit.log') },
            log: { level: 'info' },
            dns: { hosts: { 'echo.test': ['127.0.0.1'] } },
            // The checks present hundreds of refused tokens from 127.0.0.1 on purpose: no throttle.
            limits: { authFailuresPerMinute: 1_000_000, authFailuresPerMinutePerSource: 1_000_000 },
            ledger: { store: 'redis', redis: { url: redis!.url, keyPrefix: `fa${caseNo}:` }, maxStaleMs: MAX_STALE_MS },
          },
        });
        s.port = s.proc.port;
      }),
    );
    return fleet;
  }

  async function issueOk(on: Instance): Promise<Grant> {
    const r = await admin(on, 'POST', '/v1/grants', spec());
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return { id: String(r.body['id']), token: String(r.body['token']) };
  }

  /** The grant table of an instance (id → revokedAt), or null while it answers 503 (catching up). */
  async function table(on: Instance): Promise<Map<string, string | null> | null> {
    const r = await admin(on, 'GET', '/v1/grants');
    if (r.status === 503) return null;
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return new Map((r.body['grants'] as { id: string; revokedAt: string | null }[]).map((g) => [g.id, g.revokedAt]));
  }

  async function connectStatus(on: Instance, token: string): Promise<string> {
    const t = await withTimeout(openConnectTunnel(on.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${token}` }), 5000, `${on.name} CONNECT`);
    t.socket.destroy();
    const detail = /details="([^"]+)"/.exec(t.head)?.[1];
    return t.status === 200 || detail === undefined ? String(t.status) : `${t.status} ${detail}`;
  }

  /** Polls `mismatches` until it finds none, bounded; fails naming what still differs. */
  async function converge(label: string, mismatches: () => Promise<string[]>): Promise<void> {
    let last: string[] = [];
    await waitUntil(
      async () => {
        last = await mismatches();
        return last.length === 0;
      },
      { timeoutMs: CATCH_UP_MS, label },
    ).catch(() => undefined);
    expect(last, label).toEqual([]);
  }

  /** Fires every operation at once; resolves with each one's answer (a transport failure is an answer too). */
  function fire(fleet: Instance[], targets: Map<string, { rotate: Grant[]; revoke: Grant[]; forget: Grant[] }>): Promise<Outcome>[] {
    const ops: Promise<Outcome>[] = [];
    const call = (on: Instance, kind: Kind, grant: Grant | null, method: string, route: string, body?: unknown): Promise<Outcome> =>
      admin(on, method, route, body).then(
        (r): Outcome => {
          const token = kind === 'issue' || kind === 'rotate' ? (typeof r.body['token'] === 'string' ? r.body['token'] : null) : null;
          const id = kind === 'issue' ? (typeof r.body['id'] === 'string' ? r.body['id'] : null) : grant!.id;
          return { kind, on: on.name, id, status: r.status, error: typeof r.body['error'] === 'string' ? r.body['error'] : null, token, oldToken: grant?.token ?? null };
        },
        (error: Error): Outcome => ({ kind, on: on.name, id: grant?.id ?? null, status: 0, error: error.message, token: null, oldToken: grant?.token ?? null }),
      );
    for (const on of fleet) {
      const t = targets.get(on.name)!;
      for (let i = 0; i < Math.max(EACH, t.rotate.length); i += 1) {
        if (i < EACH) ops.push(call(on, 'issue', null, 'POST', '/v1/grants', spec()));
        if (t.rotate[i] !== undefined) ops.push(call(on, 'rotate', t.rotate[i]!, 'POST', `/v1/grants/${t.rotate[i]!.id}/rotate`, { graceMs: 0 }));
        if (t.revoke[i] !== undefined) ops.push(call(on, 'revoke', t.revoke[i]!, 'DELETE', `/v1/grants/${t.revoke[i]!.id}`));
        if (t.forget[i] !== undefined) ops.push(call(on, 'forget', t.forget[i]!, 'POST', `/v1/grants/${t.forget[i]!.id}/forget`));
      }
    }
    return ops;
  }

  /**
   * Grants for each instance to rotate, revoke and forget, issued on the instance before it (so each
   * instance acts on grants it learned from the fleet), known everywhere before Redis goes.
   */
  async function prepare(fleet: Instance[], per: number): Promise<Map<string, { rotate: Grant[]; revoke: Grant[]; forget: Grant[] }>> {
    const targets = new Map<string, { rotate: Grant[]; revoke: Grant[]; forget: Grant[] }>();
    await Promise.all(
      fleet.map(async (on, i) => {
        const issuer = fleet[(i + fleet.length - 1) % fleet.length]!;
        const batch = (): Promise<Grant[]> => limited(5, Array.from({ length: per }, () => () => issueOk(issuer)));
        targets.set(on.name, { rotate: await batch(), revoke: await batch(), forget: await batch() });
      }),
    );
    const all = [...targets.values()].flatMap((t) => [...t.rotate, ...t.revoke, ...t.forget].map((g) => g.id));
    await converge('every instance knows every prepared grant', async () => {
      const tables = await Promise.all(fleet.map(table));
      return tables.flatMap((t, i) => all.filter((id) => t?.has(id) !== true).map((id) => `${fleet[i]!.name} lacks ${id}`));
    });
    return targets;
  }

  /** Every answer is 2xx or 503 ledger_unavailable; `lost` also allows 404 grant_not_found for a grant acted on. */
  function checkAnswers(outcomes: readonly Outcome[], lost: boolean): void {
    const wrong = outcomes.filter((o) => {
      if (o.status >= 200 && o.status < 300) return false;
      if (o.status === 503 && o.error === 'ledger_unavailable') return false;
      if (lost && o.kind !== 'issue' && o.status === 404 && o.error === 'grant_not_found') return false;
      return true;
    });
    expect(wrong.map((o) => `${o.on} ${o.kind} ${o.id ?? ''}: ${o.status} ${o.error ?? ''}`)).toEqual([]);
  }

  function tally(outcomes: readonly Outcome[]): string {
    const counts = new Map<string, number>();
    for (const o of outcomes) counts.set(`${o.kind} ${o.status}`, (counts.get(`${o.kind} ${o.status}`) ?? 0) + 1);
    return [...counts].sort().map(([k, n]) => `${k}: ${n}`).join(', ');
  }

  /**
   * Once the fleet caught up: with the store's data kept, every instance's table is exactly what the
   * answers say, and every token does what it should on every instance.
   */
  async function checkKept(fleet: Instance[], targets: Map<string, { rotate: Grant[]; revoke: Grant[]; forget: Grant[] }>, outcomes: readonly Outcome[]): Promise<void> {
    const of = (kind: Kind, ok: boolean): Outcome[] => outcomes.filter((o) => o.kind === kind && (ok ? o.status < 300 : o.status === 503));
    const prepared = [...targets.values()].flatMap((t) => [...t.rotate, ...t.revoke, ...t.forget]);
    const forgotten = new Set(outcomes.filter((o) => o.kind === 'forget').map((o) => o.id!)); // 200 or 503 (retried until taken)
    const revoked = new Set(outcomes.filter((o) => o.kind === 'revoke').map((o) => o.id!));
    const issued = of('issue', true);
    const expected = new Set([...prepared.map((g) => g.id).filter((id) => !forgotten.has(id)), ...issued.map((o) => o.id!)]);
    await converge('every instance lists exactly the grants the answers say, revoked ones revoked', async () => {
      const tables = await Promise.all(fleet.map(table));
      return tables.flatMap((t, i) => {
        const name = fleet[i]!.name;
        if (t === null) return [`${name} answers 503`];
        const out: string[] = [];
        for (const id of expected) {
          if (!t.has(id)) out.push(`${name} lacks ${id}`);
          else if (revoked.has(id) !== (t.get(id) !== null)) out.push(`${name}: ${id} revokedAt ${t.get(id)}`);
        }
        // No grant a 503 issue left behind, and nothing forgotten still there.
        for (const id of t.keys()) if (!expected.has(id)) out.push(`${name} lists unexpected ${id}`);
        return out;
      });
    });
    const checks: { token: string; want: (status: string) => boolean; what: string }[] = [];
    for (const o of issued) checks.push({ token: o.token!, want: (s) => s === '200', what: `issued ${o.id} works` });
    for (const o of of('rotate', true)) {
      checks.push({ token: o.token!, want: (s) => s === '200', what: `rotated ${o.id}: new token works` });
      checks.push({ token: o.oldToken!, want: (s) => s === '407 token_invalid', what: `rotated ${o.id}: old token refused` });
    }
    // A rotation answered 503 changed nothing: the token before still works.
    for (const o of of('rotate', false)) checks.push({ token: o.oldToken!, want: (s) => s === '200', what: `503 rotation of ${o.id}: old token still works` });
    for (const o of outcomes.filter((x) => x.kind === 'revoke')) checks.push({ token: o.oldToken!, want: (s) => s === '403 grant_revoked', what: `revoked ${o.id} refused` });
    for (const o of outcomes.filter((x) => x.kind === 'forget')) checks.push({ token: o.oldToken!, want: (s) => s === '407 token_invalid', what: `forgotten ${o.id} refused` });
    await converge('every token does what the answers say on every instance', async () => {
      const results = await limited(
        16,
        fleet.flatMap((on) => checks.map((c) => async () => {
          const status = await connectStatus(on, c.token);
          return c.want(status) ? null : `${on.name}: ${c.what}, got ${status}`;
        })),
      );
      return results.filter((r): r is string => r !== null);
    });
  }

  it('Redis restarted with its data while every instance issues, rotates, revokes and forgets at once', async () => {
    const fleet = await startFleet();
    const targets = await prepare(fleet, EACH);
    const ops = fire(fleet, targets);
    let answered = 0;
    for (const op of ops) void op.then(() => (answered += 1));
    // Redis goes as soon as the first answer is back: the others are in flight, some inside a script.
    await Promise.race(ops);
    const beforeKill = answered;
    await redis!.kill();
    const beforeStart = answered;
    await redis!.start();
    const outcomes = await Promise.all(ops);
    console.log(`[fleet-store-answers] restart, data kept: ${tally(outcomes)}; ${beforeKill} of ${ops.length} answered before the kill, ${beforeStart} before Redis was back`);
    // Most of them met the restart.
    expect(beforeStart).toBeLessThan(ops.length / 2);
    checkAnswers(outcomes, false);
    await checkKept(fleet, targets, outcomes);
  }, 120_000);

  it('Redis down past maxStaleMs: every write answers 503 or 2xx; restarted with its data, writes at once answer 2xx or 503, and all of it reaches every instance', async () => {
    const fleet = await startFleet();
    const targets = await prepare(fleet, EACH);
    const split = (first: boolean): Map<string, { rotate: Grant[]; revoke: Grant[]; forget: Grant[] }> =>
      new Map(
        [...targets].map(([name, t]) => [
          name,
          { rotate: first ? t.rotate.slice(0, EACH / 2) : t.rotate.slice(EACH / 2), revoke: first ? t.revoke.slice(0, EACH / 2) : t.revoke.slice(EACH / 2), forget: first ? t.forget.slice(0, EACH / 2) : t.forget.slice(EACH / 2) },
        ]),
      );
    await redis!.kill();
    const away = await Promise.all(fire(fleet, split(true)));
    // Redis stays away until every instance is stale (past maxStaleMs: /readyz 503), then comes back.
    await waitUntil(async () => (await Promise.all(fleet.map((s) => admin(s, 'GET', '/readyz')))).every((r) => r.status === 503), { timeoutMs: 5000, label: 'every instance stale' });
    const ops = fire(fleet, split(false));
    await redis!.start();
    const back = await Promise.all(ops);
    console.log(`[fleet-store-answers] down past maxStaleMs: while away ${tally(away)}; at the restart ${tally(back)}`);
    checkAnswers(away, false);
    checkAnswers(back, false);
    // While away nothing was issued or rotated.
    expect(away.filter((o) => (o.kind === 'issue' || o.kind === 'rotate') && o.status !== 503)).toEqual([]);
    await checkKept(fleet, targets, [...away, ...back]);
  }, 120_000);

  it('Redis restarted empty while every instance issues, rotates, revokes and forgets at once: what the new store took reaches everyone, what it lost is gone everywhere', async () => {
    const fleet = await startFleet();
    const targets = await prepare(fleet, EACH);
    await redis!.kill({ wipe: true });
    const ops = fire(fleet, targets);
    let answered = 0;
    for (const op of ops) void op.then(() => (answered += 1));
    await redis!.start();
    const beforeStart = answered;
    const outcomes = await Promise.all(ops);
    console.log(`[fleet-store-answers] restart, data lost: ${tally(outcomes)}; ${beforeStart} of ${ops.length} answered before Redis was back`);
    checkAnswers(outcomes, true);
    const issued = outcomes.filter((o) => o.kind === 'issue' && o.status === 201);
    const expected = new Set(issued.map((o) => o.id!));
    await converge('every instance lists exactly the grants the new store took', async () => {
      const tables = await Promise.all(fleet.map(table));
      return tables.flatMap((t, i) => {
        const name = fleet[i]!.name;
        if (t === null) return [`${name} answers 503`];
        const out = [...expected].filter((id) => t.get(id) !== null).map((id) => `${name}: ${id} ${t.has(id) ? 'revoked' : 'missing'}`);
        for (const id of t.keys()) if (!expected.has(id)) out.push(`${name} lists ${id}`);
        return out;
      });
    });
    const prepared = [...targets.values()].flatMap((t) => [...t.rotate, ...t.revoke, ...t.forget]);
    const rotatedTokens = outcomes.filter((o) => o.kind === 'rotate' && o.token !== null).map((o) => o.token!);
    await converge('issued tokens work everywhere; every token of a lost grant is refused everywhere', async () => {
      const results = await limited(
        16,
        fleet.flatMap((on) => [
          ...issued.map((o) => async () => ((await connectStatus(on, o.token!)) === '200' ? null : `${on.name}: issued ${o.id} refused`)),
          ...[...prepared.map((g) => g.token), ...rotatedTokens].map((token) => async () => {
            const status = await connectStatus(on, token);
            return status === '200' ? `${on.name}: a lost grant's token works` : null;
          }),
        ]),
      );
      return results.filter((r): r is string => r !== null);
    });
  }, 120_000);
});
