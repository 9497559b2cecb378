// Turns what a connection presents into a Principal: the dedicated listener it arrived on, or a grant
// token in Proxy-Authorization (RFC 9110 §11.7.1), Basic (RFC 7617, password = token) or Bearer (RFC 6750).
import { deny, ok, type Principal, type Verdict } from '../core/index.js';
import type { TokenStore } from './token-store.js';

export interface ListenerIdentity {
  /** The grant every connection on this listener acts for, or null for token identity. */
  readonly boundGrant: string | null;
  /**
   * On an `identify: certificate` listener (issue 28): the connection's verified client certificate
   * decided `boundGrant`; `'unknown'` or `'ambiguous'` when it maps to no grant or to several.
   */
  readonly certificate?: 'mapped' | 'unknown' | 'ambiguous';
}

interface PresentedToken {
  readonly grantId: string | null;
  readonly token: string;
}

/** Parses a Proxy-Authorization value; null when absent, 'malformed' when present but unusable. */
export function parseProxyAuthorization(header: string | undefined): PresentedToken | null | 'malformed' {
  if (header === undefined || header === '') return null;
  const space = header.indexOf(' ');
  if (space <= 0) return 'malformed';
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1).trim();
  if (scheme === 'bearer') return value === '' ? 'malformed' : { grantId: null, token: value };
  if (scheme !== 'basic' || !/^[A-Za-z0-9+/]+={0,2}$/.test(value)) return 'malformed';
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return 'malformed';
  const user = decoded.slice(0, colon);
  const token = decoded.slice(colon + 1);
  if (token === '') return 'malformed';
  // Clients (curl, Python, undici) percent-decode proxy URL userinfo before encoding it; never decode again.
  return { grantId: user === '' ? null : user, token };
}

function principalFromToken(tokens: TokenStore, presented: PresentedToken): string | undefined {
  if (presented.grantId === null) return tokens.findByToken(presented.token);
  return tokens.verify(presented.grantId, presented.token) ? presented.grantId : undefined;
}

/**
 * Identifies the principal of one request. On a dedicated listener the listener decides; a token for
 * another grant presented there is refused, so authority never bleeds between principals
 * (docs/scenarios.md scenario 4).
 * That refusal, token_grant_mismatch, is audit-only: the client is answered token_invalid, and both
 * cases did the same hashing and constant-time compare, so a caller cannot learn that a token is live
 * for some other grant (review 2026-12 finding 13).
 */
export function identify(listener: ListenerIdentity, tokens: TokenStore, header: string | undefined): Verdict<Principal> {
  const presented = parseProxyAuthorization(header);
  // A certificate listener never falls back to tokens: the certificate is the principal or there is none.
  if (listener.certificate === 'unknown') return deny('certificate_not_granted', 'no grant names this client certificate');
  if (listener.certificate === 'ambiguous') return deny('certificate_not_granted', 'the client certificate matches several grants');
  const via = listener.certificate === 'mapped' ? 'certificate' : 'listener';
  if (listener.boundGrant !== null) {
    if (presented === null) return ok({ grantId: listener.boundGrant, via });
    if (presented === 'malformed') return deny('token_invalid', 'unreadable Proxy-Authorization');
    const grantId = principalFromToken(tokens, presented);
    if (grantId === undefined) return deny('token_invalid');
    if (grantId !== listener.boundGrant) return deny('token_grant_mismatch', `token of grant ${grantId}`);
    return ok({ grantId, via });
  }
  if (presented === null) return deny('token_missing');
  if (presented === 'malformed') return deny('token_invalid', 'unreadable Proxy-Authorization');
  const grantId = principalFromToken(tokens, presented);
  if (grantId === undefined) return deny('token_invalid');
  return ok({ grantId, via: 'token' });
}
