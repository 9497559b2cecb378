// parseCidr reads one allowAddresses entry (docs/configuration.md). The broader table lives in
// pin.test.ts; this file holds the near miss the December 2026 mutation review found untested.
import { describe, expect, it } from 'vitest';
import { parseCidr } from '../../../src/resolve/address-policy.js';

describe('parseCidr: one address and at most one prefix', () => {
  // Mutant 1040 (`parts.length > 2` → false) read 10.0.0.0/8/9 as 10.0.0.0/8, so a typo in
  // allowAddresses silently became another range instead of a config error.
  it.each(['10.0.0.0/8/9', '10.0.0.0/8/', 'fd00::/8/64'])('refuses %j', (text) => {
    expect(parseCidr(text)).toBeNull();
  });
});
