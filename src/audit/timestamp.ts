// The `ts` of audit records: an ISO 8601 UTC string (Date#toISOString's format). Date formatting costs
// about a microsecond, so only the minute's prefix is formatted, once a minute; seconds and
// milliseconds are appended as numbers.
let minuteStartMs = Number.NaN;
let minutePrefix = '';

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

function pad3(n: number): string {
  return n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`;
}

export function isoTimestamp(nowMs: number = Date.now()): string {
  const inMinute = nowMs - minuteStartMs;
  if (!(inMinute >= 0 && inMinute < 60_000)) {
    minuteStartMs = nowMs - (((nowMs % 60_000) + 60_000) % 60_000);
    // "YYYY-MM-DDTHH:MM:" (the sign-and-six-digit years beyond 9999 keep their longer prefix).
    const iso = new Date(minuteStartMs).toISOString();
    minutePrefix = iso.slice(0, iso.length - 7);
  }
  const ms = nowMs - minuteStartMs;
  return `${minutePrefix}${pad2(Math.floor(ms / 1000))}.${pad3(ms % 1000)}Z`;
}
