// The `ts` of audit records: an ISO 8601 UTC string (Date#toISOString's format). Date formatting costs
// about a microsecond, so only the minute's prefix is formatted, once a minute; seconds and
// milliseconds are appended as numbers, or written as digits straight into a line's bytes.
let minuteStartMs = Number.NaN;
let minutePrefix = '';

/** Makes `minutePrefix` the one of nowMs's minute; returns the milliseconds into that minute. */
function msInMinute(nowMs: number): number {
  const inMinute = nowMs - minuteStartMs;
  if (!(inMinute >= 0 && inMinute < 60_000)) {
    minuteStartMs = nowMs - (((nowMs % 60_000) + 60_000) % 60_000);
    // "YYYY-MM-DDTHH:MM:" (the sign-and-six-digit years beyond 9999 keep their longer prefix).
    const iso = new Date(minuteStartMs).toISOString();
    minutePrefix = iso.slice(0, iso.length - 7);
  }
  return nowMs - minuteStartMs;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

function pad3(n: number): string {
  return n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`;
}

export function isoTimestamp(nowMs: number = Date.now()): string {
  const ms = msInMinute(nowMs);
  return `${minutePrefix}${pad2(Math.floor(ms / 1000))}.${pad3(ms % 1000)}Z`;
}

/** The most bytes writeIsoTimestamp writes: `+275760-09-13T00:00:00.000Z`. */
export const MAX_TIMESTAMP_BYTES = 27;

/** Writes isoTimestamp(nowMs) at `at` as ASCII without building it; returns the offset after it. */
export function writeIsoTimestamp(out: Uint8Array, at: number, nowMs: number): number {
  const ms = msInMinute(nowMs);
  const prefix = minutePrefix;
  let o = at;
  for (let i = 0; i < prefix.length; i++) out[o++] = prefix.charCodeAt(i);
  const seconds = Math.floor(ms / 1000);
  const milli = ms % 1000;
  out[o++] = 0x30 + Math.floor(seconds / 10);
  out[o++] = 0x30 + (seconds % 10);
  out[o++] = 0x2e; // .
  out[o++] = 0x30 + Math.floor(milli / 100);
  out[o++] = 0x30 + (Math.floor(milli / 10) % 10);
  out[o++] = 0x30 + (milli % 10);
  out[o++] = 0x5a; // Z
  return o;
}
