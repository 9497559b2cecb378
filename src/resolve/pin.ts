// Chooses the addresses a hop may dial: every resolved address is classified against the grant's
// policy, forbidden ones are dropped (never dialed, even if listed first), and the survivors become
// PinnedAddress values that egress dials in order without resolving the name again (DNS rebinding).
import { deny, ok, type CanonicalDestination, type ClassifiedAddress, type PinnedAddress, type ResolvedAddress, type Verdict } from '../core/index.js';
import { checkAddress, type AddressPolicy } from './address-policy.js';

export interface PinResult {
  readonly classified: readonly ClassifiedAddress[];
  readonly pinned: readonly PinnedAddress[];
}

export function pin(dest: CanonicalDestination, answers: readonly ResolvedAddress[], policy: AddressPolicy): { verdict: Verdict<readonly PinnedAddress[]>; classified: readonly ClassifiedAddress[] } {
  const classified = answers.map((a) => checkAddress(policy, a, dest.port));
  const pinned: PinnedAddress[] = [];
  for (const c of classified) {
    if (c.allowed) pinned.push({ address: c.address, family: c.family, port: dest.port, class: c.class } as PinnedAddress);
  }
  if (pinned.length > 0) return { verdict: ok(pinned), classified };
  const isSelf = classified.some((c) => c.class === 'self');
  const classes = [...new Set(classified.map((c) => c.class))].join(', ');
  return { verdict: deny(isSelf ? 'address_self' : 'address_class_denied', `resolves to ${classes}`), classified };
}

/** A literal destination is its own single answer. */
export function literalAnswer(dest: CanonicalDestination): ResolvedAddress | null {
  if (dest.hostKind === 'ipv4') return { address: dest.host, family: 4 };
  if (dest.hostKind === 'ipv6') return { address: dest.host, family: 6 };
  return null;
}
