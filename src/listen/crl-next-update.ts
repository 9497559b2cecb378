// When a CRL stops being current (RFC 5280 §5.1.2.5, nextUpdate). Node has no CRL parser, and past that
// time OpenSSL fails every handshake its chain check reaches (CRL_HAS_EXPIRED: fail closed), so a TLS
// listener warns ahead of it as it warns ahead of its own certificate's end (listener-tls.ts). Reads only
// the DER of TBSCertList up to nextUpdate; anything it cannot read is "unknown" (null), never an error:
// OpenSSL, not this, decides whether the CRL is usable.

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;

interface Element {
  readonly tag: number;
  /** Where the content starts and ends. */
  readonly start: number;
  readonly end: number;
}

function element(der: Buffer, at: number): Element | null {
  if (at + 2 > der.length) return null;
  const tag = der[at] as number;
  let length = der[at + 1] as number;
  let start = at + 2;
  if (length & 0x80) {
    const octets = length & 0x7f;
    if (octets === 0 || octets > 4 || start + octets > der.length) return null;
    length = 0;
    for (let i = 0; i < octets; i++) length = length * 256 + (der[start + i] as number);
    start += octets;
  }
  const end = start + length;
  return end > der.length ? null : { tag, start, end };
}

/** RFC 5280 §4.1.2.5: UTCTime YYMMDDHHMMSSZ (years 1950-2049), GeneralizedTime YYYYMMDDHHMMSSZ. */
function timeOf(der: Buffer, e: Element): number | null {
  const text = der.toString('latin1', e.start, e.end);
  const m = e.tag === UTC_TIME ? /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text) : /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (m === null) return null;
  const year = e.tag === UTC_TIME ? (Number(m[1]) < 50 ? 2000 : 1900) + Number(m[1]) : Number(m[1]);
  const ms = Date.UTC(year, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
  return Number.isFinite(ms) ? ms : null;
}

/** The nextUpdate of one DER CRL, in ms since the epoch, or null when it has none or cannot be read. */
export function crlNextUpdate(der: Buffer): number | null {
  const list = element(der, 0);
  if (list?.tag !== SEQUENCE) return null;
  const tbs = element(der, list.start);
  if (tbs?.tag !== SEQUENCE) return null;
  let at = tbs.start;
  let e = element(der, at);
  // version (v2) is optional; then signature, issuer, thisUpdate, and nextUpdate if present.
  if (e?.tag === INTEGER) {
    at = e.end;
    e = element(der, at);
  }
  for (let skip = 0; skip < 3; skip++) {
    if (e === null) return null;
    at = e.end;
    e = element(der, at);
  }
  if (e === null || (e.tag !== UTC_TIME && e.tag !== GENERALIZED_TIME)) return null;
  return timeOf(der, e);
}

/** The earliest nextUpdate of the PEM CRLs in `pem`: when the first of them stops being current. */
export function earliestCrlNextUpdate(pem: string): number | null {
  let earliest: number | null = null;
  for (const block of pem.match(/-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g) ?? []) {
    const der = Buffer.from(block.replace(/-----(BEGIN|END) X509 CRL-----|\s/g, ''), 'base64');
    const next = crlNextUpdate(der);
    if (next !== null && (earliest === null || next < earliest)) earliest = next;
  }
  return earliest;
}
