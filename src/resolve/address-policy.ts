// A grant's address policy, compiled once: which classes and CIDRs beyond public it may reach.
// unspecified, multicast and self are refused whatever the grant says (docs/threat-model.md: Sluice
// never connects to its own listeners, admin socket or metrics port). `host` (the machine's own
// interface addresses) is reached only by a grant that names it: neither a range class nor a CIDR
// admits it.
import net from 'node:net';
import { GRANTABLE_CLASSES, type AddressClass, type ClassifiedAddress, type ResolvedAddress } from '../core/index.js';
import { classifyAddress } from './address-class.js';
import type { SelfAddresses } from './self-addresses.js';

export interface AddressPolicy {
  readonly classes: ReadonlySet<AddressClass>;
  /** allowAddresses, one list per family: net.BlockList matches IPv4 against IPv6 subnets in their
   * ::ffff: form, so `::/0` in one shared list would admit every IPv4 address, loopback included. */
  readonly addresses4: net.BlockList;
  readonly addresses6: net.BlockList;
  readonly self: SelfAddresses;
}

export interface AddressPolicyIssue {
  readonly index: number;
  readonly message: string;
}

export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const parts = text.split('/');
  if (parts.length > 2) return null;
  const [address = '', prefixText] = parts;
  const family = net.isIP(address);
  if (family === 0) return null;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) return null;
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

export function compileAddressPolicy(
  classes: readonly string[],
  cidrs: readonly string[],
  self: SelfAddresses,
): { ok: true; value: AddressPolicy } | { ok: false; issues: AddressPolicyIssue[] } {
  const issues: AddressPolicyIssue[] = [];
  const allowed = new Set<AddressClass>(['public']);
  for (const cls of classes) {
    if ((GRANTABLE_CLASSES as readonly string[]).includes(cls)) allowed.add(cls as AddressClass);
  }
  const addresses4 = new net.BlockList();
  const addresses6 = new net.BlockList();
  cidrs.forEach((text, index) => {
    const cidr = parseCidr(text);
    if (cidr === null) issues.push({ index, message: `"${text}" is not an IP address or CIDR` });
    else (cidr.family === 'ipv4' ? addresses4 : addresses6).addSubnet(cidr.address, cidr.prefix, cidr.family);
  });
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, value: { classes: allowed, addresses4, addresses6, self } };
}

const NEVER: ReadonlySet<AddressClass> = new Set(['unspecified', 'multicast', 'self']);

/** Classifies one resolved address for one destination port and says whether the grant allows it. */
export function checkAddress(policy: AddressPolicy, resolved: ResolvedAddress, port: number): ClassifiedAddress {
  const { class: baseClass, effective } = classifyAddress(resolved.address);
  const cls = policy.self.classOf(effective, baseClass, port);
  if (NEVER.has(cls)) return { address: resolved.address, family: resolved.family, class: cls, allowed: false };
  // A host address is `host` whatever its range (a private interface address too): `private` or a
  // CIDR over it must not reach services bound to 0.0.0.0/[::] on this machine (review 2026-12, finding 8).
  if (cls === 'host') return { address: resolved.address, family: resolved.family, class: cls, allowed: policy.classes.has('host') };
  // Only the effective address counts, against CIDRs of its own family: a CIDR over the outer IPv6
  // (64:ff9b::/96 for NAT64, ::ffff:0:0/96, ::/0) must not admit the loopback or metadata address it embeds.
  const isV4 = net.isIPv4(effective);
  const allowed = policy.classes.has(cls) || (isV4 ? policy.addresses4.check(effective, 'ipv4') : policy.addresses6.check(effective, 'ipv6'));
  return { address: resolved.address, family: resolved.family, class: cls, allowed };
}
