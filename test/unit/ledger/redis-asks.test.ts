// The fleet's asks and standing answers on a real redis-server (issue 27; ledger/redis-asks.ts and the
// KEEP_ANSWER and FORGET scripts of redis-store.ts), through two stores as two instances hold them. What
// must not slip: two asks for one (grant, destination) because two instances raised at once; two answers
// that both win; an ask that never ends (listed after its deadline, or blocking a new ask for the pair);
// an instance that hears its own messages back; a standing answer kept for a revoked grant, or one that
// outlives its forgotten grant, or that a forget of another grant whose id shares a prefix takes away.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { openRedisLedgerStore, type GrantRecord, type RedisLedgerStore, type StandingAnswer, type StoredAsk, type StoredAskAnswer, type StoredAskMessage } from '../../../src/ledger/index.js';
import { grantSpecSchema } from '../../../src/config/index.js';
import { redisSkip, startRedis, type TestRedis } from '../../support/redis.js';
import { waitUntil } from '../../support/wait.js';

const PREFIX = 't:';
const X = 'https://x.test:443';
const Y = 'http://y.test:8080';
const ALLOW_FOR_GRANT: StoredAskAnswer = { decision: 'allow', scope: 'grant', answeredBy: 'admin' };
const TIMED_OUT: StoredAskAnswer = { decision: 'timeout', scope: null, answeredBy: 'timeout' };

function view(ask: string, grant: string, destination: string, timeoutMs: number, generation: string | null = null): StoredAsk {
  const nowMs = Date.now();
  return { ask, grant, generation, destination, raisedAt: new Date(nowMs).toISOString(), expiresAt: new Date(nowMs + timeoutMs).toISOString(), waiting: 1 };
}

const answer = (grant: string, destination: string, decision: 'allow' | 'deny'): StandingAnswer => ({ grant, destination, decision, at: '2026-12-05T10:00:00.000Z' });

function record(id: string): GrantRecord {
  return { id, source: 'runtime', spec: grantSpecSchema.parse({ destinations: ['https://a.test'] }), tokenSha256: 'c'.repeat(64), issuedAt: '2026-12-05T09:00:00.000Z', revokedAt: null };
}

describe.skipIf(redisSkip())('the fleet’s asks and standing answers on Redis', () => {
  let redis: TestRedis;
  let first: RedisLedgerStore;
  let second: RedisLedgerStore;
  const clients: Redis[] = [];

  const openStore = (): Promise<RedisLedgerStore> => openRedisLedgerStore({ target: { kind: 'url', url: redis.url }, keyPrefix: PREFIX, commandTimeoutMs: 1000 });

  beforeEach(async () => {
    redis = await startRedis({ persistent: false });
    first = await openStore();
    second = await openStore();
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.disconnect();
    await first.close();
    await second.close();
    await redis.stop();
  });

  async function client(): Promise<Redis> {
    const c = await redis.client();
    clients.push(c);
    return c;
  }

  describe('RedisAsks', () => {
    it('raises one ask per grant and destination: a second raise, from another instance, gets the first one’s id', async () => {
      const [i1, i2] = [first.asks('i1'), second.asks('i2')];
      const raised = view('ask-1', 'g-1', X, 60_000, 'run-7');
      expect(await i1.raise(raised, 60_000)).toEqual(raised);
      expect(await i2.raise(view('ask-2', 'g-1', X, 60_000), 60_000)).toEqual(raised);
      expect(await i1.raise(view('ask-3', 'g-1', X, 60_000), 60_000)).toEqual(raised);
      // Another destination, or another grant, is another ask.
      expect((await i2.raise(view('ask-4', 'g-1', Y, 60_000), 60_000)).ask).toBe('ask-4');
      expect((await i2.raise(view('ask-5', 'g-2', X, 60_000), 60_000)).ask).toBe('ask-5');
      expect((await i1.list()).map((v) => v.ask).sort()).toEqual(['ask-1', 'ask-4', 'ask-5']);
    });

    it('lets the first answer win: then already_answered, on either instance; an unknown id is not_found; outcome tells how it ended', async () => {
      const [i1, i2] = [first.asks('i1'), second.asks('i2')];
      const raised = view('ask-1', 'g-1', X, 60_000);
      await i1.raise(raised, 60_000);
      expect(await i1.outcome('ask-1')).toBeNull();
      expect(await i2.answer('ask-1', ALLOW_FOR_GRANT)).toEqual({ result: 'answered', view: raised });
      expect(await i1.answer('ask-1', TIMED_OUT)).toEqual({ result: 'already_answered', view: null });
      expect(await i2.answer('ask-1', { decision: 'deny', scope: 'once', answeredBy: 'admin' })).toEqual({ result: 'already_answered', view: null });
      expect(await i1.answer('ask-never', ALLOW_FOR_GRANT)).toEqual({ result: 'not_found', view: null });
      expect(await i1.outcome('ask-1')).toEqual(ALLOW_FOR_GRANT);
      expect(await i2.outcome('ask-1')).toEqual(ALLOW_FOR_GRANT);
      expect(await i1.outcome('ask-never')).toBeNull();
      expect(await i1.list()).toEqual([]);
      // Ended: the next hop to the pair raises a new ask.
      expect((await i2.raise(view('ask-2', 'g-1', X, 60_000), 60_000)).ask).toBe('ask-2');
    });

    it('lets exactly one of many concurrent answers win (a timeout claim among them)', async () => {
      const [i1, i2] = [first.asks('i1'), second.asks('i2')];
      await i1.raise(view('ask-1', 'g-1', X, 60_000), 60_000);
      const claims = await Promise.all([
        i1.answer('ask-1', TIMED_OUT),
        i2.answer('ask-1', ALLOW_FOR_GRANT),
        i1.answer('ask-1', { decision: 'deny', scope: 'once', answeredBy: 'admin' }),
        i2.answer('ask-1', { decision: 'deny', scope: 'grant', answeredBy: 'admin' }),
      ]);
      expect(claims.filter((c) => c.result === 'answered')).toHaveLength(1);
      expect(claims.filter((c) => c.result === 'already_answered')).toHaveLength(3);
      const sent = [TIMED_OUT, ALLOW_FOR_GRANT, { decision: 'deny', scope: 'once', answeredBy: 'admin' }, { decision: 'deny', scope: 'grant', answeredBy: 'admin' }];
      expect(await i1.outcome('ask-1')).toEqual(sent[claims.findIndex((c) => c.result === 'answered')]);
    });

    it('does not list an ask past its deadline', async () => {
      const i1 = first.asks('i1');
      const late = { ...view('ask-late', 'g-1', X, 60_000), expiresAt: new Date(Date.now() - 1).toISOString() };
      await i1.raise(late, 60_000);
      await i1.raise(view('ask-live', 'g-1', Y, 60_000), 60_000);
      expect((await i1.list()).map((v) => v.ask)).toEqual(['ask-live']);
      expect((await second.asks('i2').list()).map((v) => v.ask)).toEqual(['ask-live']);
    });

    it('after the ask’s timeout, a new raise for the pair gets a new id, and the old ask is no longer listed', async () => {
      const [i1, i2] = [first.asks('i1'), second.asks('i2')];
      await i1.raise(view('ask-1', 'g-1', X, 100), 100);
      const c = await client();
      await waitUntil(async () => (await c.exists(`${PREFIX}askkey:g-1 ${X}`)) === 0 && (await i2.list()).length === 0, { timeoutMs: 2000, label: 'the ask’s timeout passed' });
      expect((await i2.raise(view('ask-2', 'g-1', X, 60_000), 60_000)).ask).toBe('ask-2');
      expect((await i1.list()).map((v) => v.ask)).toEqual(['ask-2']);
      // The timed-out ask can still be claimed once (the raiser's timer, a joined instance after its grace).
      expect((await i1.answer('ask-1', TIMED_OUT)).result).toBe('answered');
      expect((await i2.answer('ask-1', ALLOW_FOR_GRANT)).result).toBe('already_answered');
    });

    it('sends raised and answered messages to the other instances, never back to the one that sent them', async () => {
      const [i1, i2] = [first.asks('i1'), second.asks('i2')];
      const heardBy1: StoredAskMessage[] = [];
      const heardBy2: StoredAskMessage[] = [];
      await i1.subscribe((m) => heardBy1.push(m));
      await i2.subscribe((m) => heardBy2.push(m));
      const c = await client();
      await waitUntil(async () => ((await c.pubsub('NUMSUB', `${PREFIX}asks`)) as [string, number])[1] === 2, { timeoutMs: 2000, label: 'both instances listen' });

      const fromI1 = view('ask-1', 'g-1', X, 60_000, 'run-7');
      await i1.raise(fromI1, 60_000);
      await i1.answer('ask-1', TIMED_OUT);
      await waitUntil(() => heardBy2.length === 2, { timeoutMs: 2000, label: 'i2 hears i1’s two messages' });
      expect(heardBy2).toEqual([
        { kind: 'raised', from: 'i1', view: fromI1 },
        { kind: 'answered', from: 'i1', view: fromI1, answer: TIMED_OUT },
      ]);
      // Redis delivers one connection's messages in order: once i1 hears i2's, its own would have come first.
      const fromI2 = view('ask-2', 'g-2', X, 60_000);
      await i2.raise(fromI2, 60_000);
      await waitUntil(() => heardBy1.length > 0, { timeoutMs: 2000, label: 'i1 hears i2’s message' });
      expect(heardBy1).toEqual([{ kind: 'raised', from: 'i2', view: fromI2 }]);
      await i1.answer('ask-2', ALLOW_FOR_GRANT);
      await waitUntil(() => heardBy2.length === 3, { timeoutMs: 2000, label: 'i2 hears i1’s answer' });
      expect(heardBy2.map((m) => m.from)).toEqual(['i1', 'i1', 'i1']);
      expect(heardBy2[2]).toEqual({ kind: 'answered', from: 'i1', view: fromI2, answer: ALLOW_FOR_GRANT });
    });
  });

  describe('standing answers in the shared store', () => {
    it('refuses an answer for a revoked grant; keeps others, in load().answers and in the log as `answered`', async () => {
      await first.revoke('g-dead', '2026-12-05T09:30:00.000Z');
      const before = await first.revision();
      expect(await first.keepAnswer(answer('g-dead', X, 'allow'), false)).toBe(0);
      expect(await first.revision()).toBe(before);
      // A config grant lives in each instance's file: the store keeps answers for ids it has no record of.
      expect(await first.keepAnswer(answer('cfg', X, 'allow'), false)).toBeGreaterThan(0);
      expect(await first.keepAnswer(answer('cfg', X, 'deny'), false)).toBeGreaterThan(0);
      expect(await first.keepAnswer(answer('cfg', Y, 'allow'), false)).toBeGreaterThan(0);
      const snapshot = await second.load();
      expect(snapshot.answers).toEqual(expect.arrayContaining([answer('cfg', X, 'deny'), answer('cfg', Y, 'allow')]));
      expect(snapshot.answers).toHaveLength(2);
      expect(snapshot.revision).toBe(before + 3);
      expect(await second.changesSince(before)).toEqual([
        { revision: before + 1, kind: 'answered', answer: answer('cfg', X, 'allow') },
        { revision: before + 2, kind: 'answered', answer: answer('cfg', X, 'deny') },
        { revision: before + 3, kind: 'answered', answer: answer('cfg', Y, 'allow') },
      ]);
    });

    it('drops a forgotten grant’s answers, never those of a grant whose id it prefixes (g-1 and g-10)', async () => {
      expect(await first.issue(record('g-1'))).toBe(true);
      expect(await first.issue(record('g-10'))).toBe(true);
      await first.keepAnswer(answer('g-1', X, 'allow'), true);
      await first.keepAnswer(answer('g-1', Y, 'deny'), true);
      await first.keepAnswer(answer('g-10', X, 'deny'), true);
      await first.keepAnswer(answer('g-1-b', X, 'allow'), false);
      const before = await first.revision();
      await first.forget('g-1', '2026-12-05T11:00:00.000Z');
      // An instance that has not applied the forget yet cannot leave an answer behind for it.
      expect(await first.keepAnswer(answer('g-1', X, 'allow'), true)).toBe(0);
      const snapshot = await second.load();
      expect(snapshot.answers).toEqual(expect.arrayContaining([answer('g-10', X, 'deny'), answer('g-1-b', X, 'allow')]));
      expect(snapshot.answers).toHaveLength(2);
      expect(snapshot.runtime.map((r) => r.id)).toEqual(['g-10']);
      expect(await second.changesSince(before)).toEqual([{ revision: before + 1, kind: 'forgot', id: 'g-1', at: '2026-12-05T11:00:00.000Z' }]);
    });
  });
});
