// Compiles grants (from config now, from the ledger later) into what a hop consults: the authority set,
// the address policy and the token hash. Compiled once per grant; lookups are a map get.
import { sha256, type TokenStore } from '../identity/index.js';
import { compileAuthoritySet, type AuthoritySet } from '../authority/index.js';
import { compileAddressPolicy, type AddressPolicy, type SelfAddresses } from '../resolve/index.js';
import type { GrantSection, GrantLimits, ConfigIssue } from '../config/index.js';

export interface RuntimeGrant {
  readonly id: string;
  readonly authority: AuthoritySet;
  readonly addressPolicy: AddressPolicy;
  readonly requireAttestedAddress: boolean;
  readonly expiresAtMs: number | null;
  readonly limits: GrantLimits;
  readonly generation: string | null;
}

export interface CompiledGrants {
  readonly grants: ReadonlyMap<string, RuntimeGrant>;
  readonly tokens: ReadonlyMap<string, Buffer>;
}

function expiresAtMs(value: string | Date | undefined): number | null {
  if (value === undefined) return null;
  return value instanceof Date ? value.getTime() : Date.parse(value);
}

export function compileGrants(
  sections: readonly GrantSection[],
  env: Readonly<Record<string, string | undefined>>,
  self: SelfAddresses,
): { ok: true; value: CompiledGrants } | { ok: false; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const grants = new Map<string, RuntimeGrant>();
  const tokens = new Map<string, Buffer>();
  sections.forEach((section, i) => {
    const authority = compileAuthoritySet(section.destinations, section.unrestricted);
    if (!authority.ok) for (const issue of authority.issues) issues.push({ path: `grants[${i}].destinations[${issue.index}]`, message: issue.message });
    const policy = compileAddressPolicy(section.allowAddressClasses, section.allowAddresses, self);
    if (!policy.ok) for (const issue of policy.issues) issues.push({ path: `grants[${i}].allowAddresses[${issue.index}]`, message: issue.message });
    if (section.tokenSha256 !== undefined) tokens.set(section.id, Buffer.from(section.tokenSha256, 'hex'));
    else if (section.tokenEnv !== undefined) {
      const token = env[section.tokenEnv];
      if (token === undefined || token === '') issues.push({ path: `grants[${i}].tokenEnv`, message: `environment variable ${section.tokenEnv} is not set` });
      else tokens.set(section.id, sha256(token));
    }
    if (authority.ok && policy.ok) {
      grants.set(section.id, {
        id: section.id,
        authority: authority.value,
        addressPolicy: policy.value,
        requireAttestedAddress: section.requireAttestedAddress,
        expiresAtMs: expiresAtMs(section.limits.expiresAt),
        limits: section.limits,
        generation: section.generation ?? null,
      });
    }
  });
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, value: { grants, tokens } };
}

export function loadTokens(store: TokenStore, tokens: ReadonlyMap<string, Buffer>): void {
  for (const [grantId, hash] of tokens) store.set(grantId, hash);
}
