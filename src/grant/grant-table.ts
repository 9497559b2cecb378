// Compiles one grant (from config or the ledger) into what a hop consults: the authority set and the
// address policy. Compiled once per grant; a hop's lookup is a map get.
import { sha256 } from '../identity/index.js';
import { compileAuthoritySet, type AuthoritySet } from '../authority/index.js';
import { compileAddressPolicy, type AddressPolicy, type SelfAddresses } from '../resolve/index.js';
import type { GrantSection, GrantLimits, ConfigIssue, GrantSpec } from '../config/index.js';

export interface RuntimeGrant {
  readonly id: string;
  readonly authority: AuthoritySet;
  readonly addressPolicy: AddressPolicy;
  readonly requireAttestedAddress: boolean;
  /** Domain-fronting guard: the tunnel's ClientHello must name the authorized host. */
  readonly requireSniMatch: boolean;
  readonly expiresAtMs: number | null;
  readonly revoked: boolean;
  readonly limits: GrantLimits;
  readonly generation: string | null;
  /** How long a destination no rule names is held on an ask; null: never asked, refused at once. */
  readonly askTimeoutMs: number | null;
  /** The client certificate that identifies the grant on an `identify: certificate` listener (issue 28). */
  readonly clientCertificate: { readonly sha256: string } | { readonly uriSan: string } | null;
}

/** The index key of a grant's client certificate. */
export function certificateKey(certificate: { readonly sha256: string } | { readonly uriSan: string }): string {
  return 'sha256' in certificate ? `sha256 ${certificate.sha256}` : `uri ${certificate.uriSan}`;
}

function expiresAtMs(value: string | Date | undefined): number | null {
  if (value === undefined) return null;
  return value instanceof Date ? value.getTime() : Date.parse(value);
}

/** `prefix` names the grant in issues: `grants[3]` for config, `` for an admin request body. */
export function compileGrant(id: string, spec: GrantSpec, revoked: boolean, self: SelfAddresses, prefix: string): { ok: true; value: RuntimeGrant } | { ok: false; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const at = (key: string): string => (prefix === '' ? key : `${prefix}.${key}`);
  const authority = compileAuthoritySet(spec.destinations, spec.unrestricted);
  if (!authority.ok) for (const issue of authority.issues) issues.push({ path: at(`destinations[${issue.index}]`), message: issue.message });
  const policy = compileAddressPolicy(spec.allowAddressClasses, spec.allowAddresses, self);
  if (!policy.ok) for (const issue of policy.issues) issues.push({ path: at(`allowAddresses[${issue.index}]`), message: issue.message });
  if (!authority.ok || !policy.ok) return { ok: false, issues };
  return {
    ok: true,
    value: {
      id,
      authority: authority.value,
      addressPolicy: policy.value,
      requireAttestedAddress: spec.requireAttestedAddress,
      requireSniMatch: spec.tls.requireSniMatch,
      expiresAtMs: expiresAtMs(spec.limits.expiresAt),
      revoked,
      limits: spec.limits,
      generation: spec.generation ?? null,
      askTimeoutMs: spec.ask?.timeoutMs ?? null,
      clientCertificate: spec.clientCertificate ?? null,
    },
  };
}

/** The token hash of each config grant: tokenSha256, or SHA-256 of the variable tokenEnv names. */
export function configTokens(sections: readonly GrantSection[], env: Readonly<Record<string, string | undefined>>): { ok: true; value: Map<string, Buffer> } | { ok: false; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const tokens = new Map<string, Buffer>();
  sections.forEach((section, i) => {
    if (section.tokenSha256 !== undefined) tokens.set(section.id, Buffer.from(section.tokenSha256, 'hex'));
    else if (section.tokenEnv !== undefined) {
      const token = env[section.tokenEnv];
      if (token === undefined || token === '') issues.push({ path: `grants[${i}].tokenEnv`, message: `environment variable ${section.tokenEnv} is not set` });
      else tokens.set(section.id, sha256(token));
    }
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, value: tokens };
}

/** Validates every config grant (check-config and start) without installing anything. */
export function checkConfigGrants(sections: readonly GrantSection[], env: Readonly<Record<string, string | undefined>>, self: SelfAddresses): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  sections.forEach((section, i) => {
    const { id, tokenSha256: _h, tokenEnv: _e, ...spec } = section;
    const compiled = compileGrant(id, spec, false, self, `grants[${i}]`);
    if (!compiled.ok) issues.push(...compiled.issues);
  });
  const tokens = configTokens(sections, env);
  if (!tokens.ok) issues.push(...tokens.issues);
  return issues;
}
