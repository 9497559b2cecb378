// The `ts` of audit records: an ISO 8601 UTC string, formatted once per millisecond (many records share
// one under load, and Date#toISOString costs about a microsecond).
let lastMs = -1;
let lastIso = '';

export function isoTimestamp(nowMs: number = Date.now()): string {
  if (nowMs !== lastMs) {
    lastMs = nowMs;
    lastIso = new Date(nowMs).toISOString();
  }
  return lastIso;
}
