// Threat: DNS rebinding (a name that answers an allowed address when checked and a forbidden one when
// dialed, TTL 0). Sluice resolves once per hop, checks, and dials exactly the checked address: the
// pinned address is the dialed address (docs/scenarios.md scenario 3; smokescreen's
// TOCTOU fix).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl } from '../support/curl.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import type { LookupAll } from '../../src/core/index.js';

const TOKEN = 'tok-rebind';

describe('DNS rebinding', () => {
  let origin: Origin;
  let trap: net.Server;
  let trapped = 0;
  let sluice: TestSluice;
  let queries = 0;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    trap = net.createServer((s) => s.destroy());
    trap.on('connection', () => (trapped += 1));
    await new Promise<void>((resolve) => trap.listen(origin.port, '127.0.0.2', resolve));
    // Alternates between the allowed 127.0.0.1 and the forbidden 127.0.0.2, with TTL 0.
    const flipping: LookupAll = async () => {
      queries += 1;
      return [{ address: queries % 2 === 1 ? '127.0.0.1' : '127.0.0.2', family: 4, ttlSeconds: 0 }];
    };
    sluice = await startSluice(
      { grants: [{ id: 'r', tokenSha256: tokenHash(TOKEN), destinations: [`http://flip.test:${origin.port}`, `https://flip.test:${origin.port}`], allowAddresses: ['127.0.0.1/32'] }] },
      { lookup: flipping },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    await new Promise<void>((resolve) => trap.close(() => resolve()));
  });

  it('dials the checked address and refuses the rebound answer, never connecting to it', async () => {
    const results: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      const result = await runCurl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '--proxy', `http://r:${TOKEN}@127.0.0.1:${sluice.port}`, `http://flip.test:${origin.port}/${i}`]);
      results.push(result.stdout);
    }
    expect(results).toEqual(['200', '403', '200', '403', '200', '403']);
    expect(trapped).toBe(0);
    for (const decision of sluice.decisions()) {
      if (decision.decision === 'allow') expect(decision.pinned).toBe('127.0.0.1');
      else expect(decision.reason).toBe('address_class_denied');
    }
    expect(queries).toBe(6);
  });
});
