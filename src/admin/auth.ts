// Admin bearer-token checks by SHA-256 in constant time; never logs, stores or echoes a token.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { AdminSection } from '../config/index.js';

/** SHA-256 of a UTF-8 string, the only form in which an admin token is kept. */
export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * The admin token digest from `admin.tokenSha256`, or from the variable `admin.tokenEnv` names (the
 * caller passes the environment), or null when neither is set. Throws when the named variable is empty.
 */
export function resolveAdminTokenSha256(
  admin: Pick<AdminSection, 'tokenSha256' | 'tokenEnv'>,
  env: Readonly<Record<string, string | undefined>>,
): Buffer | null {
  if (admin.tokenSha256 !== undefined) return Buffer.from(admin.tokenSha256, 'hex');
  if (admin.tokenEnv === undefined) return null;
  const token = env[admin.tokenEnv];
  if (token === undefined || token === '') throw new Error(`admin.tokenEnv names ${admin.tokenEnv}, which is not set or empty`);
  return sha256(token);
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** True when the Authorization header carries the bearer token whose SHA-256 is `expected`. */
export function isAdminTokenValid(authorization: string | undefined, expected: Buffer): boolean {
  const match = authorization === undefined ? null : BEARER.exec(authorization);
  // Hash even when the header is missing, so the answer takes the same time either way.
  const presented = sha256(match?.[1] ?? '');
  const matches = timingSafeEqual(presented, expected);
  return match !== null && matches;
}
