// Grant tokens as the proxy holds them: only their SHA-256, compared in constant time. The token itself
// is never stored, logged or echoed (principle A8 in docs/principles.md:
// a routing intermediary never persists or logs a token). A rotated grant may keep its previous hash
// for a grace period; it is checked against the clock on every use, so it never outlives its grace.
import { hash, timingSafeEqual } from 'node:crypto';

export function sha256(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

/** A rotated grant's previous token hash and the wall-clock ms (epoch) until which it is still accepted. */
export interface PreviousToken {
  readonly sha256: Buffer;
  readonly untilMs: number;
}

export class TokenStore {
  private readonly byGrant = new Map<string, Buffer>();
  private readonly byHash = new Map<string, string>();
  private readonly previousByGrant = new Map<string, PreviousToken>();
  private readonly previousByHash = new Map<string, string>();
  // Compared against when a grant id is unknown, so the answer's timing and body do not reveal whether it exists.
  private readonly decoy = sha256('sluice-decoy-token');

  constructor(private readonly now: () => number = Date.now) {}

  /** Installs a grant's token hash; a previous token (a rotation's grace) is dropped. */
  set(grantId: string, tokenSha256: Buffer): void {
    this.delete(grantId);
    this.byGrant.set(grantId, tokenSha256);
    this.byHash.set(tokenSha256.toString('hex'), grantId);
  }

  /**
   * A rotation: `tokenSha256` becomes the grant's token; `previous`, when given and not yet ended, is
   * accepted too until `previous.untilMs`. Without it the old token stops at once.
   */
  rotate(grantId: string, tokenSha256: Buffer, previous: PreviousToken | null): void {
    this.set(grantId, tokenSha256);
    if (previous === null || previous.untilMs <= this.now() || previous.sha256.equals(tokenSha256)) return;
    this.previousByGrant.set(grantId, previous);
    this.previousByHash.set(previous.sha256.toString('hex'), grantId);
  }

  /** Drops a grant's previous token (its grace ended); true if there was one. */
  dropPrevious(grantId: string): boolean {
    const previous = this.previousByGrant.get(grantId);
    if (previous === undefined) return false;
    this.previousByHash.delete(previous.sha256.toString('hex'));
    this.previousByGrant.delete(grantId);
    return true;
  }

  /** When a grant's previous token stops being accepted (epoch ms), or null without one. */
  previousUntil(grantId: string): number | null {
    return this.previousByGrant.get(grantId)?.untilMs ?? null;
  }

  delete(grantId: string): void {
    const old = this.byGrant.get(grantId);
    if (old !== undefined) this.byHash.delete(old.toString('hex'));
    this.byGrant.delete(grantId);
    this.dropPrevious(grantId);
  }

  /** Basic credentials: grant id as user, token as password. */
  verify(grantId: string, token: string): boolean {
    const expected = this.byGrant.get(grantId);
    const presented = sha256(token);
    const matches = timingSafeEqual(presented, expected ?? this.decoy);
    // Always a second comparison, so whether a grant is in a grace period does not show in the timing.
    const previous = this.previousByGrant.get(grantId);
    const matchesPrevious = timingSafeEqual(presented, previous?.sha256 ?? this.decoy);
    if (expected !== undefined && matches) return true;
    return previous !== undefined && matchesPrevious && this.now() < previous.untilMs;
  }

  /** Bearer (or Basic with an empty user): find the grant by the token's hash. */
  findByToken(token: string): string | undefined {
    const key = sha256(token).toString('hex');
    const current = this.byHash.get(key);
    if (current !== undefined) return current;
    const grantId = this.previousByHash.get(key);
    if (grantId === undefined) return undefined;
    const previous = this.previousByGrant.get(grantId);
    return previous !== undefined && this.now() < previous.untilMs ? grantId : undefined;
  }
}
