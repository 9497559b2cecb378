// Grant tokens as the proxy holds them: only their SHA-256, compared in constant time. The token itself
// is never stored, logged or echoed (principle A8 in docs/principles.md:
// a routing intermediary never persists or logs a token).
import { hash, timingSafeEqual } from 'node:crypto';

export function sha256(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

export class TokenStore {
  private readonly byGrant = new Map<string, Buffer>();
  private readonly byHash = new Map<string, string>();
  // Compared against when a grant id is unknown, so the answer's timing and body do not reveal whether it exists.
  private readonly decoy = sha256('sluice-decoy-token');

  set(grantId: string, tokenSha256: Buffer): void {
    this.delete(grantId);
    this.byGrant.set(grantId, tokenSha256);
    this.byHash.set(tokenSha256.toString('hex'), grantId);
  }

  delete(grantId: string): void {
    const old = this.byGrant.get(grantId);
    if (old !== undefined) this.byHash.delete(old.toString('hex'));
    this.byGrant.delete(grantId);
  }

  /** Basic credentials: grant id as user, token as password. */
  verify(grantId: string, token: string): boolean {
    const expected = this.byGrant.get(grantId);
    const presented = sha256(token);
    const matches = timingSafeEqual(presented, expected ?? this.decoy);
    return expected !== undefined && matches;
  }

  /** Bearer (or Basic with an empty user): find the grant by the token's hash. */
  findByToken(token: string): string | undefined {
    return this.byHash.get(sha256(token).toString('hex'));
  }
}
