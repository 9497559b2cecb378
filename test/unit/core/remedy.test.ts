// The fix table (src/core/remedy.ts): one entry for every reason code, short single lines, filled from
// the decision's own fields (the rule the hop needed, the classes the grant refused), never an address.
// That each flag and config key a fix names exists is checked against main.ts and docs/configuration.md
// in test/architecture/reason-codes.test.ts.
import { describe, expect, it } from 'vitest';
import {
  ADDRESS_CLASSES,
  AuditOnlyReasons,
  deniedClasses,
  GRANTABLE_CLASSES,
  Reasons,
  remedyFor,
  Remedies,
  sentReason,
  UNGRANTABLE_CLASS_REMEDY,
  wantedRule,
  type AddressClass,
  type ReasonCode,
  type RemedyFacts,
} from '../../../src/core/index.js';

const facts = (more: Partial<RemedyFacts> = {}): RemedyFacts => ({ request: 'connect', scheme: null, canonical: 'deny.test:22443', addresses: [], ...more });
const answer = (cls: AddressClass, allowed = false): { class: AddressClass; allowed: boolean } => ({ class: cls, allowed });

describe('Remedies: one fix per reason code', () => {
  it('has an entry for every code of Reasons and none for a code Reasons does not have', () => {
    expect(Object.keys(Remedies).sort()).toEqual(Object.keys(Reasons).sort());
  });

  it.each(Object.entries(Remedies))('%s: one short line, no placeholder but <rule> and <class>', (_code, fix) => {
    expect(fix).not.toMatch(/[\r\n\0]/);
    expect(fix.length).toBeGreaterThan(10);
    expect(fix.length).toBeLessThanOrEqual(220);
    expect(fix.replaceAll('<rule>', '').replaceAll('<class>', '')).not.toMatch(/[<>{}]/);
  });

  it('the fix of a code no grant or config can change says so instead of inventing one', () => {
    for (const code of ['address_self', 'route_unsupported'] as const) expect(Remedies[code]).toMatch(/^nothing the grant can change: /);
    expect(Remedies.internal_error).toMatch(/^report it: /);
  });

  it('the fix of an audit-only code is never what its client is answered with: the sent code has its own', () => {
    for (const [code, sentAs] of Object.entries(AuditOnlyReasons)) {
      expect(sentReason(code as ReasonCode)).toBe(sentAs);
      expect(Remedies[sentAs]).not.toBe(Remedies[code as ReasonCode]);
      expect(Remedies[sentAs]).not.toMatch(/another grant|listener’s own/);
    }
  });
});

describe('remedyFor: filled from the decision', () => {
  it('destination_not_granted names the rule the hop needed: https for a CONNECT, the request’s scheme otherwise', () => {
    expect(remedyFor('destination_not_granted', facts())).toBe('add a destination rule for https://deny.test:22443 to the grant (sluice run --destination https://deny.test:22443)');
    expect(remedyFor('destination_not_granted', facts({ request: 'forward', scheme: 'http', canonical: 'deny.test:80' }))).toContain('--destination http://deny.test:80)');
    expect(remedyFor('destination_not_granted', facts({ scheme: 'wss' }))).toContain('wss://deny.test:22443');
    expect(remedyFor('tunnel_not_http', facts())).toContain('add a destination rule for https://deny.test:22443 to the grant');
  });

  it('leaves <rule> when no destination was parsed', () => {
    expect(wantedRule(facts({ canonical: null }))).toBeNull();
    expect(remedyFor('destination_not_granted', facts({ canonical: null }))).toBe(Remedies.destination_not_granted);
  });

  it('address_class_denied names each refused grantable class once, in the list and as repeated flags', () => {
    const addresses = [answer('loopback'), answer('public', true), answer('private'), answer('loopback'), answer('multicast')];
    expect(deniedClasses({ addresses })).toEqual(['loopback', 'private', 'multicast']);
    const fix = remedyFor('address_class_denied', facts({ addresses }));
    expect(fix).toContain('allowAddressClasses: [loopback, private] on the grant (sluice run --allow-class loopback --allow-class private)');
    expect(fix).not.toContain('multicast');
    expect(fix).not.toContain('<class>');
  });

  it.each(GRANTABLE_CLASSES)('a refused %s answer gets allowAddressClasses: [%s]', (cls) => {
    expect(remedyFor('address_class_denied', facts({ addresses: [answer(cls)] }))).toContain(`allowAddressClasses: [${cls}] on the grant (sluice run --allow-class ${cls})`);
  });

  it.each(ADDRESS_CLASSES.filter((c) => !GRANTABLE_CLASSES.includes(c) && c !== 'public'))('only %s answers: nothing the grant can change, no class a config would refuse', (cls) => {
    expect(remedyFor('address_class_denied', facts({ addresses: [answer(cls)] }))).toBe(UNGRANTABLE_CLASS_REMEDY);
  });

  it('never names an address: the facts carry none, and the classes alone are filled in', () => {
    const addresses = [{ ...answer('loopback'), address: '127.0.0.9' }];
    const withAddresses = facts({ addresses });
    expect(remedyFor('address_class_denied', withAddresses)).not.toContain('127.0.0.9');
  });

  it('every other code is its table entry, with <rule> filled where it has one', () => {
    for (const code of Object.keys(Reasons) as ReasonCode[]) {
      if (code === 'address_class_denied') continue;
      expect(remedyFor(code, facts())).toBe(Remedies[code].replaceAll('<rule>', 'https://deny.test:22443'));
    }
  });
});
