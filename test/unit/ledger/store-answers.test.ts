// Ledger writes against a shared store that fails (review 2026-12-04 finding 7): a store error is never a
// bare error (the admin API would answer 500) but ERR_LEDGER_STORE_UNAVAILABLE (503 ledger_unavailable);
// a store that is back within STORE_WAIT_MS (Redis restarting) is waited for and answers; one away longer
// fails after about STORE_WAIT_MS, and the next call then fails at once instead of waiting again.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProxyError } from '../../../src/core/index.js';
import { grantSpecSchema } from '../../../src/config/index.js';
import { Ledger, LedgerStore, STORE_WAIT_MS, type GrantRecord, type SharedLedgerStore } from '../../../src/ledger/index.js';
import { OWN_UID } from '../../support/sluice.js';

/** A shared store that throws a plain Error (as ioredis does) until `downUntil` (performance.now()), then takes everything. */
class FlakyStore implements SharedLedgerStore {
  readonly label = 'redis://fake';
  downUntil = 0;
  calls = 0;
  readonly taken = new Map<string, GrantRecord>();

  private check(): void {
    this.calls += 1;
    if (performance.now() < this.downUntil) throw new Error('Connection is closed.');
  }
  load = () => Promise.resolve({ revision: 0, runtime: [...this.taken.values()], revoked: new Map<string, string>() });
  issue = async (record: GrantRecord): Promise<boolean> => {
    this.check();
    this.taken.set(record.id, record);
    return true;
  };
  rotate = async (record: GrantRecord): Promise<'rotated'> => {
    this.check();
    this.taken.set(record.id, record);
    return 'rotated';
  };
  revoke = async (): Promise<void> => this.check();
  forget = async (): Promise<void> => this.check();
  keepAnswer = async (): Promise<number> => {
    this.check();
    return 1;
  };
  restoreTombstones = (): Promise<void> => Promise.resolve();
  revision = (): Promise<number> => Promise.resolve(0);
  changesSince = (): Promise<[]> => Promise.resolve([]);
  onNotify = (): Promise<void> => Promise.resolve();
  close = (): Promise<void> => Promise.resolve();
}

const spec = grantSpecSchema.parse({ destinations: ['https://a.test'] });
let dir: string;
let store: FlakyStore;
let ledger: Ledger;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ledger-answers-'));
  store = new FlakyStore();
  ledger = await Ledger.open(new LedgerStore(dir, OWN_UID), undefined, store);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The error a call rejects with, and how long it took (ms). */
async function failure(call: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  try {
    await call();
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
  throw new Error('expected the call to fail');
}

describe('Ledger with a shared store that does not answer', () => {
  it('issue: a plain store error becomes ERR_LEDGER_STORE_UNAVAILABLE after about STORE_WAIT_MS, and nothing is issued', async () => {
    store.downUntil = Infinity;
    const { error, ms } = await failure(() => ledger.issue(spec));
    expect(error).toBeInstanceOf(ProxyError);
    expect((error as ProxyError).code).toBe('ERR_LEDGER_STORE_UNAVAILABLE');
    expect((error as ProxyError).message).toContain('nothing was issued');
    // It waited for the store (retried), within STORE_WAIT_MS: a delay that would overrun it is not taken.
    expect(ms).toBeGreaterThanOrEqual(STORE_WAIT_MS * 0.6);
    expect(ms).toBeLessThan(STORE_WAIT_MS + 300);
    expect(store.calls).toBeGreaterThan(2);
    expect(ledger.list()).toEqual([]);
  });

  it('issue: a store away for less than STORE_WAIT_MS is waited for, and the grant is issued', async () => {
    store.downUntil = performance.now() + 300;
    const started = performance.now();
    const { record } = await ledger.issue(spec);
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(STORE_WAIT_MS);
    expect(store.taken.get(record.id)).toEqual(record);
    expect(ledger.get(record.id)).toEqual(record);
  });

  it('after one wait ran out, the next call fails at once (no second wait); once the store answers, calls wait again', async () => {
    store.downUntil = Infinity;
    await failure(() => ledger.issue(spec));
    const callsBefore = store.calls;
    const second = await failure(() => ledger.issue(spec));
    expect((second.error as ProxyError).code).toBe('ERR_LEDGER_STORE_UNAVAILABLE');
    expect(second.ms).toBeLessThan(100);
    expect(store.calls - callsBefore).toBe(1);
    // A rotation and a revocation meet the same: one try each, at once, 503 not a bare error.
    store.downUntil = 0;
    const { record } = await ledger.issue(spec);
    store.downUntil = Infinity;
    await failure(() => ledger.rotate(record.id, 0));
    const rotate = await failure(() => ledger.rotate(record.id, 0));
    expect((rotate.error as ProxyError).code).toBe('ERR_LEDGER_STORE_UNAVAILABLE');
    expect(rotate.ms).toBeLessThan(100);
    const revoke = await failure(() => ledger.revoke(record.id));
    expect((revoke.error as ProxyError).code).toBe('ERR_LEDGER_STORE_UNAVAILABLE');
    expect(revoke.ms).toBeLessThan(100);
    // Back: the store answered once, so the next outage is waited for again.
    store.downUntil = 0;
    await ledger.sendUnsent();
    store.downUntil = performance.now() + 200;
    const again = await ledger.issue(spec);
    expect(store.taken.has(again.record.id)).toBe(true);
  });

  it('a ProxyError from the store (a corrupt store) is not retried', async () => {
    let calls = 0;
    store.issue = () => {
      calls += 1;
      return Promise.reject(new ProxyError('ERR_LEDGER_STORE_CORRUPT', 'bad record'));
    };
    const { error, ms } = await failure(() => ledger.issue(spec));
    expect(calls).toBe(1);
    expect(ms).toBeLessThan(100);
    // Whatever the store's ProxyError, the issue answers that nothing was issued, as unavailable.
    expect((error as ProxyError).code).toBe('ERR_LEDGER_STORE_UNAVAILABLE');
  });
});
