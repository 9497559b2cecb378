// Writes a hop's audit record as one JSON line straight into a byte buffer, field by field from the
// hop's facts: no record object and, on the common path, no string. The bytes are exactly
// formatRecord's (so JSON.stringify's) for the record the hop would give; a property test holds it to
// that. Never decides anything: every value is the hop's, or read through the facts below.
import { Reasons, type CloseReason, type Principal, type ReasonCode, type RequestKind, type Scheme } from '../core/index.js';
import { redactTarget, type AuditAddress } from './record.js';
import { MAX_TIMESTAMP_BYTES, writeIsoTimestamp } from './timestamp.js';

/** Where a hop ran: its connection and listener (proxy/'s ConnectionContext is one). */
export interface AuditPlace {
  readonly id: string;
  readonly listener: string;
  /** The client address, carried or the peer's (null on a Unix socket); absent when there is no connection. */
  readonly auditSource?: string | null;
}

/** What both records of a hop read of it (proxy/'s Hop is one). */
export interface HopRecordFacts {
  readonly index: number;
  readonly kind: RequestKind;
  readonly principal: Principal | null;
  readonly canonical: { readonly key: string } | null;
}

/** What the decision record reads of a hop, as it was decided (proxy/'s Hop is one). */
export interface HopDecisionFacts extends HopRecordFacts {
  readonly method: string;
  /** The target as received: the record holds it redacted. */
  readonly target: string;
  readonly scheme: Scheme | null;
  readonly isAllowed: boolean;
  readonly reason: ReasonCode;
  /** '' for none. */
  readonly detail: string;
  readonly rule: string | null;
  readonly addresses: readonly AuditAddress[];
  readonly route: { readonly label: string } | null;
  readonly identifyUs: number | null;
  readonly authorizeUs: number | null;
  readonly routeUs: number | null;
  readonly resolveUs: number | null;
  readonly dialUs: number | null;
  /** The address the record reports as pinned (docs/audit-log.md, `pinned`). */
  readonly recordedPin: string | null;
  /** The label of the upstream proxy that carried the hop; null for direct or not dialed. */
  readonly upstream: string | null;
  readonly attested: boolean | null;
  readonly credentialObserving: boolean | null;
}

/** What the close record reads of a hop. */
export interface HopCloseFacts extends HopRecordFacts {
  readonly dialed: { readonly address: string } | null;
  /** Date.now() when the hop started: durationMs counts from it. */
  readonly startedAtMs: number;
  readonly firstByteUs: number | null;
}

/** How a relayed hop ended. */
export interface CloseOutcome {
  readonly closedBy: CloseReason;
  readonly status: number | null;
  readonly bytesUp: number;
  readonly bytesDown: number;
}

const ascii = new TextEncoder();
// Every constant between two values, pre-encoded. Copied with TypedArray#set: a quick benchmark of
// the 10 longest had it at about 13 ns a key against about 14.5 ns for a byte loop (ADR 0012).
const DECISION_HEAD = ascii.encode('{"v":1,"kind":"decision","ts":"');
const CLOSE_HEAD = ascii.encode('{"v":1,"kind":"close","ts":"');
const CONNECTION = ascii.encode('","connection":');
const HOP = ascii.encode(',"hop":');
const LISTENER = ascii.encode(',"listener":');
const PRINCIPAL = ascii.encode(',"principal":');
const VIA = ascii.encode(',"via":');
const REQUEST = ascii.encode(',"request":');
const METHOD = ascii.encode(',"method":');
const TARGET = ascii.encode(',"target":');
const SCHEME = ascii.encode(',"scheme":');
const CANONICAL = ascii.encode(',"canonical":');
const ALLOW = ascii.encode(',"decision":"allow","reason":');
const DENY = ascii.encode(',"decision":"deny","reason":');
const STATUS = ascii.encode(',"status":');
const DETAIL = ascii.encode(',"detail":');
const RULE = ascii.encode(',"rule":');
const ADDRESSES = ascii.encode(',"addresses":[');
const ADDRESS = ascii.encode('{"address":');
const NEXT_ADDRESS = ascii.encode(',{"address":');
const CLASS = ascii.encode(',"class":');
const ALLOWED = ascii.encode(',"allowed":');
const PINNED_AFTER_ADDRESSES = ascii.encode('],"pinned":');
const PINNED = ascii.encode(',"pinned":');
const ROUTE = ascii.encode(',"route":');
const UPSTREAM = ascii.encode(',"upstream":');
const ATTESTED = ascii.encode(',"attested":');
const CREDENTIAL_OBSERVING = ascii.encode(',"credentialObserving":');
const IDENTIFY_US = ascii.encode(',"timings":{"identifyUs":');
const AUTHORIZE_US = ascii.encode(',"authorizeUs":');
const ROUTE_US = ascii.encode(',"routeUs":');
const RESOLVE_US = ascii.encode(',"resolveUs":');
const DIAL_US = ascii.encode(',"dialUs":');
const SOURCE = ascii.encode('},"source":');
const CLOSED_BY = ascii.encode(',"closedBy":');
const BYTES_UP = ascii.encode(',"bytesUp":');
const BYTES_DOWN = ascii.encode(',"bytesDown":');
const DURATION_MS = ascii.encode(',"durationMs":');
const FIRST_BYTE_US = ascii.encode(',"firstByteUs":');
const END = ascii.encode('}\n');
const NULL = ascii.encode('null');
const TRUE = ascii.encode('true');
const FALSE = ascii.encode('false');

function bytes(out: Buffer, at: number, constant: Uint8Array): number {
  out.set(constant, at);
  return at + constant.length;
}

/**
 * A JSON string. Printable ASCII other than " and \ needs no escaping (RFC 8259 §7) and is copied char
 * by char; anything else is JSON.stringify's text, as UTF-8 (the only string made, and only then).
 */
function str(out: Buffer, at: number, s: string): number {
  out[at] = 0x22;
  let o = at + 1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return at + out.write(JSON.stringify(s), at, 'utf8');
    out[o++] = c;
  }
  out[o] = 0x22;
  return o + 1;
}

function nstr(out: Buffer, at: number, s: string | null): number {
  return s === null ? bytes(out, at, NULL) : str(out, at, s);
}

function bool(out: Buffer, at: number, b: boolean | null): number {
  return bytes(out, at, b === null ? NULL : b ? TRUE : FALSE);
}

/** A number as `${n}` writes it; null (JSON.stringify's) when it is null or not finite. */
function num(out: Buffer, at: number, n: number | null): number {
  if (n === null || !Number.isFinite(n)) return bytes(out, at, NULL);
  if (!Number.isSafeInteger(n)) {
    // A fraction, or an integer past 2^53 (whose digits a division by 10 would not keep): rare.
    const text = `${n}`;
    for (let i = 0; i < text.length; i++) out[at + i] = text.charCodeAt(i);
    return at + text.length;
  }
  let o = at;
  let rest = n;
  if (rest < 0) {
    out[o++] = 0x2d;
    rest = -rest;
  }
  // -0 is "0", as `${-0}` is.
  let digits = 1;
  for (let t = rest; t >= 10; t = (t - (t % 10)) / 10) digits += 1;
  const end = o + digits;
  for (let i = end - 1; i >= o; i--) {
    const d = rest % 10;
    out[i] = 0x30 + d;
    rest = (rest - d) / 10;
  }
  return end;
}

/** The most bytes a string takes: \uXXXX for each UTF-16 unit at worst, and its quotes. */
function strBound(s: string | null): number {
  return s === null ? NULL.length : 6 * s.length + 2;
}
/** `${n}` of a double is at most 24 characters (`-1.7976931348623157e+308`). */
const NUMBER_BYTES = 25;
/** redactTarget keeps at most 256 characters and its mark. */
const TARGET_UNITS = 257;

const DECISION_FIXED =
  [DECISION_HEAD, CONNECTION, HOP, LISTENER, PRINCIPAL, VIA, REQUEST, METHOD, TARGET, SCHEME, CANONICAL, ALLOW, STATUS, DETAIL, RULE, ADDRESSES, PINNED_AFTER_ADDRESSES, ROUTE, UPSTREAM, ATTESTED, CREDENTIAL_OBSERVING, IDENTIFY_US, AUTHORIZE_US, ROUTE_US, RESOLVE_US, DIAL_US, SOURCE, END].reduce((sum, c) => sum + c.length, 0) +
  MAX_TIMESTAMP_BYTES + 7 * NUMBER_BYTES + 2 * FALSE.length + 6 * TARGET_UNITS + 2;
const ADDRESS_FIXED = NEXT_ADDRESS.length + CLASS.length + ALLOWED.length + FALSE.length + 1;

/** An upper bound of the bytes encodeDecision writes for this hop. */
export function decisionBytesBound(hop: HopDecisionFacts, place: AuditPlace): number {
  const principal = hop.principal;
  let n =
    DECISION_FIXED +
    strBound(place.id) + strBound(place.listener) + strBound(principal === null ? null : principal.grantId) + strBound(principal === null ? null : principal.via) +
    strBound(hop.kind) + strBound(hop.method) + strBound(hop.scheme) + strBound(hop.canonical === null ? null : hop.canonical.key) + strBound(hop.reason) +
    strBound(hop.detail) + strBound(hop.rule) + strBound(hop.recordedPin) + strBound(hop.route === null ? null : hop.route.label) + strBound(hop.upstream) +
    strBound(place.auditSource ?? null);
  const addresses = hop.addresses;
  for (let i = 0; i < addresses.length; i++) {
    const a = addresses[i]!;
    n += ADDRESS_FIXED + strBound(a.address) + strBound(a.class);
  }
  return n;
}

/** The fields both records open with: kind, ts, connection, hop, listener. */
function encodeHead(out: Buffer, at: number, head: Uint8Array, index: number, place: AuditPlace, nowMs: number): number {
  let o = bytes(out, at, head);
  o = writeIsoTimestamp(out, o, nowMs);
  o = bytes(out, o, CONNECTION);
  o = str(out, o, place.id);
  o = bytes(out, o, HOP);
  o = num(out, o, index);
  o = bytes(out, o, LISTENER);
  return str(out, o, place.listener);
}

/** Writes the decision record of `hop` at `at` (formatRecord of the proxy's decisionOf); returns the offset after it. */
export function encodeDecision(out: Buffer, at: number, hop: HopDecisionFacts, place: AuditPlace, nowMs: number): number {
  let o = encodeHead(out, at, DECISION_HEAD, hop.index, place, nowMs);
  const principal = hop.principal;
  o = bytes(out, o, PRINCIPAL);
  o = principal === null ? bytes(out, o, NULL) : str(out, o, principal.grantId);
  o = bytes(out, o, VIA);
  o = principal === null ? bytes(out, o, NULL) : str(out, o, principal.via);
  o = bytes(out, o, REQUEST);
  o = str(out, o, hop.kind);
  o = bytes(out, o, METHOD);
  o = str(out, o, hop.method);
  o = bytes(out, o, TARGET);
  o = str(out, o, redactTarget(hop.target));
  o = bytes(out, o, SCHEME);
  o = nstr(out, o, hop.scheme);
  o = bytes(out, o, CANONICAL);
  o = nstr(out, o, hop.canonical === null ? null : hop.canonical.key);
  o = bytes(out, o, hop.isAllowed ? ALLOW : DENY);
  o = str(out, o, hop.reason);
  o = bytes(out, o, STATUS);
  o = num(out, o, Reasons[hop.reason].status);
  o = bytes(out, o, DETAIL);
  o = hop.detail === '' ? bytes(out, o, NULL) : str(out, o, hop.detail);
  o = bytes(out, o, RULE);
  o = nstr(out, o, hop.rule);
  o = bytes(out, o, ADDRESSES);
  const addresses = hop.addresses;
  for (let i = 0; i < addresses.length; i++) {
    const a = addresses[i]!;
    o = bytes(out, o, i === 0 ? ADDRESS : NEXT_ADDRESS);
    o = str(out, o, a.address);
    o = bytes(out, o, CLASS);
    o = str(out, o, a.class);
    o = bytes(out, o, ALLOWED);
    o = bool(out, o, a.allowed);
    out[o++] = 0x7d; // }
  }
  o = bytes(out, o, PINNED_AFTER_ADDRESSES);
  o = nstr(out, o, hop.recordedPin);
  o = bytes(out, o, ROUTE);
  o = nstr(out, o, hop.route === null ? null : hop.route.label);
  o = bytes(out, o, UPSTREAM);
  o = nstr(out, o, hop.upstream);
  o = bytes(out, o, ATTESTED);
  o = bool(out, o, hop.attested);
  o = bytes(out, o, CREDENTIAL_OBSERVING);
  o = bool(out, o, hop.credentialObserving);
  o = bytes(out, o, IDENTIFY_US);
  o = num(out, o, hop.identifyUs);
  o = bytes(out, o, AUTHORIZE_US);
  o = num(out, o, hop.authorizeUs);
  o = bytes(out, o, ROUTE_US);
  o = num(out, o, hop.routeUs);
  o = bytes(out, o, RESOLVE_US);
  o = num(out, o, hop.resolveUs);
  o = bytes(out, o, DIAL_US);
  o = num(out, o, hop.dialUs);
  o = bytes(out, o, SOURCE);
  o = nstr(out, o, place.auditSource ?? null);
  return bytes(out, o, END);
}

const CLOSE_FIXED =
  [CLOSE_HEAD, CONNECTION, HOP, LISTENER, PRINCIPAL, REQUEST, CANONICAL, PINNED, CLOSED_BY, STATUS, BYTES_UP, BYTES_DOWN, DURATION_MS, FIRST_BYTE_US, END].reduce((sum, c) => sum + c.length, 0) +
  MAX_TIMESTAMP_BYTES + 6 * NUMBER_BYTES;

/** An upper bound of the bytes encodeClose writes for this hop. */
export function closeBytesBound(hop: HopCloseFacts, place: AuditPlace, outcome: CloseOutcome): number {
  return (
    CLOSE_FIXED + strBound(place.id) + strBound(place.listener) + strBound(hop.principal === null ? null : hop.principal.grantId) + strBound(hop.kind) +
    strBound(hop.canonical === null ? null : hop.canonical.key) + strBound(hop.dialed === null ? null : hop.dialed.address) + strBound(outcome.closedBy)
  );
}

/** Writes the close record of `hop` at `at`, closed at `nowMs`; returns the offset after it. */
export function encodeClose(out: Buffer, at: number, hop: HopCloseFacts, place: AuditPlace, outcome: CloseOutcome, nowMs: number): number {
  let o = encodeHead(out, at, CLOSE_HEAD, hop.index, place, nowMs);
  o = bytes(out, o, PRINCIPAL);
  o = nstr(out, o, hop.principal === null ? null : hop.principal.grantId);
  o = bytes(out, o, REQUEST);
  o = str(out, o, hop.kind);
  o = bytes(out, o, CANONICAL);
  o = nstr(out, o, hop.canonical === null ? null : hop.canonical.key);
  o = bytes(out, o, PINNED);
  o = nstr(out, o, hop.dialed === null ? null : hop.dialed.address);
  o = bytes(out, o, CLOSED_BY);
  o = str(out, o, outcome.closedBy);
  o = bytes(out, o, STATUS);
  o = num(out, o, outcome.status);
  o = bytes(out, o, BYTES_UP);
  o = num(out, o, outcome.bytesUp);
  o = bytes(out, o, BYTES_DOWN);
  o = num(out, o, outcome.bytesDown);
  o = bytes(out, o, DURATION_MS);
  o = num(out, o, nowMs - hop.startedAtMs);
  o = bytes(out, o, FIRST_BYTE_US);
  o = num(out, o, hop.firstByteUs);
  return bytes(out, o, END);
}
