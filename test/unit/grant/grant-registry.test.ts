// The byte budget of a grant (limits.maxBytes) is one counter per grant, which every tunnel and
// forwarded request of the grant takes from while its bytes stream (review 2026-12 finding 6). A take is
// synchronous, so of two hops racing for the last bytes only one gets them; the chunk that passes the
// budget is counted and refused.
import { describe, expect, it } from 'vitest';
import { grantSpecSchema } from '../../../src/config/index.js';
import { GrantRegistry } from '../../../src/grant/index.js';
import { SelfAddresses } from '../../../src/resolve/index.js';

function registryWith(limits: Record<string, number>): { registry: GrantRegistry; install: (next: Record<string, number>) => void } {
  const registry = new GrantRegistry(new SelfAddresses([]), Date.now);
  const install = (next: Record<string, number>): void => {
    const compiled = registry.compile({ id: 'g', spec: grantSpecSchema.parse({ destinations: ['http://a.test'], limits: next }), revoked: false, tokenSha256: null }, '');
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    registry.install([{ grant: compiled.value, tokenSha256: null }]);
  };
  install(limits);
  return { registry, install };
}

const grantOf = (registry: GrantRegistry) => {
  const grant = registry.grants.get('g');
  if (grant === undefined) throw new Error('grant g not installed');
  return grant;
};

describe('GrantRegistry byte budget', () => {
  it('has no budget for a grant without maxBytes: nothing is counted while streaming', () => {
    const { registry } = registryWith({});
    expect(registry.budgetOf(grantOf(registry))).toBeNull();
    expect(registry.bytesLeft('g')).toBe(Infinity);
  });

  it('relays up to maxBytes, refuses (but counts) the chunk that passes it, and is spent after', () => {
    const { registry } = registryWith({ maxBytes: 1000 });
    const budget = registry.budgetOf(grantOf(registry));
    expect(budget?.take(600)).toBe(true);
    expect(budget?.take(400)).toBe(true);
    expect(budget?.hasLeft()).toBe(false);
    expect(budget?.take(1)).toBe(false);
    expect(registry.usageOf('g').bytes).toBe(1001);
    expect(registry.bytesLeft('g')).toBe(0);
  });

  it('is one counter for every hop of the grant: tunnels (addBytes) and forwarded requests (budgetOf)', () => {
    const { registry } = registryWith({ maxBytes: 1000 });
    const first = registry.budgetOf(grantOf(registry));
    const second = registry.budgetOf(grantOf(registry));
    expect(first).toBe(second);
    expect(registry.addBytes('g', 900)).toBe(true);
    expect(first?.take(100)).toBe(true);
    expect(second?.take(1)).toBe(false);
    expect(registry.addBytes('g', 1)).toBe(false);
  });

  it('follows a reload: a raised maxBytes applies to the budget hops already hold', () => {
    const { registry, install } = registryWith({ maxBytes: 1000 });
    const budget = registry.budgetOf(grantOf(registry));
    expect(budget?.take(1500)).toBe(false);
    install({ maxBytes: 4000 });
    expect(budget?.hasLeft()).toBe(true);
    expect(budget?.take(100)).toBe(true);
    expect(registry.bytesLeft('g')).toBe(2400);
  });
});
