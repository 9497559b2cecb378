// When a grant's limits.expiresAt has already passed: a config grant and a run-time grant alike could
// never serve a hop, so both are refused by name (issue 17, item 3; issue 25, UX review 2026-12-04
// finding 10).

/** `expiresAt` as written when it is at or before `nowMs`, otherwise null (no expiry, or a later one). */
export function passedExpiry(expiresAt: string | Date | undefined, nowMs: number): string | null {
  if (expiresAt === undefined) return null;
  const atMs = expiresAt instanceof Date ? expiresAt.getTime() : Date.parse(expiresAt);
  if (!(atMs <= nowMs)) return null;
  return expiresAt instanceof Date ? expiresAt.toISOString() : expiresAt;
}
