// relayLimitsFor (src/proxy/hop/runtime.ts): a grant may ask for a shorter idle timeout than the proxy's,
// never a longer one. A principal that could lengthen it would hold tunnels (and the proxy's sockets and
// connection slots) open past what the operator set: a slow drain of the proxy's capacity.
import { describe, expect, it } from 'vitest';
import type { RelayLimits } from '../../../../src/relay/index.js';
import { relayLimitsFor } from '../../../../src/proxy/hop/runtime.js';

const PROXY: RelayLimits = Object.freeze({ idleTimeoutMs: 60_000 });
const rt = { relay: PROXY };
const grantWith = (idleTimeoutMs?: number): Parameters<typeof relayLimitsFor>[1] => ({ limits: idleTimeoutMs === undefined ? {} : { idleTimeoutMs } });

describe('relayLimitsFor: a grant’s idleTimeoutMs shortens, never lengthens, the proxy’s', () => {
  it.each([
    ['no idle timeout of its own', undefined, 60_000],
    ['a shorter one', 5_000, 5_000],
    ['one millisecond', 1, 1],
    ['exactly the proxy’s', 60_000, 60_000],
    ['a longer one', 60_001, 60_000],
    ['a day', 86_400_000, 60_000],
  ])('a grant with %s relays with the proxy’s or its own, whichever is shorter', (_label, grantIdle, expected) => {
    expect(relayLimitsFor(rt, grantWith(grantIdle)).idleTimeoutMs).toBe(expected);
  });

  it('hands back the proxy’s own limits object when the grant does not shorten it (no allocation per tunnel)', () => {
    expect(relayLimitsFor(rt, grantWith())).toBe(PROXY);
    expect(relayLimitsFor(rt, grantWith(120_000))).toBe(PROXY);
  });

  it('never changes the proxy’s limits for later tunnels of other grants', () => {
    relayLimitsFor(rt, grantWith(10));
    expect(relayLimitsFor(rt, grantWith()).idleTimeoutMs).toBe(60_000);
    expect(PROXY.idleTimeoutMs).toBe(60_000);
  });
});
