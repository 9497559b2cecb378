// Generated-input properties of the pure stages a hostile sandbox reaches first (issue #5, item 5): the
// address classifier is total and gives an embedded IPv4 its own class in all five IPv6 forms (RFC 4291
// §2.5.5, RFC 6052, RFC 3056, RFC 4380); every reason code has a status, a message and an RFC 9209
// Proxy-Status that parses as an sf-list member (RFC 8941 §3.1); the CONNECT and absolute-form target
// parsers never throw and canonicalize idempotently; and pin() never lets a forbidden address through.
// The seed is printed; rerun one with SLUICE_FUZZ_SEED=<seed>.
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { parseAbsoluteTarget, parseConnectTarget } from '../../src/authority/canonical-destination.js';
import { ADDRESS_CLASSES, GRANTABLE_CLASSES, type AddressClass, type CanonicalDestination, type ResolvedAddress } from '../../src/core/types.js';
import { AuditOnlyReasons, Reasons, isReasonCode, sentReason, type ReasonCode } from '../../src/core/reason.js';
import { classifyAddress } from '../../src/resolve/address-class.js';
import { compileAddressPolicy, type AddressPolicy } from '../../src/resolve/address-policy.js';
import { pin } from '../../src/resolve/pin.js';
import { HostAddresses } from '../../src/resolve/host-addresses.js';
import { SelfAddresses } from '../../src/resolve/self-addresses.js';
import { proxyStatus } from '../../src/core/index.js';
import { denialBody } from '../../src/proxy/ingress/respond.js';

const SEED = Number(process.env['SLUICE_FUZZ_SEED'] ?? (Date.now() ^ (process.pid << 8)) >>> 0);
const RUNS = Number(process.env['SLUICE_FUZZ_RUNS'] ?? 1500);
const params = (numRuns = RUNS): { seed: number; numRuns: number } => ({ seed: SEED, numRuns });
console.log(`[fuzz/properties] seed=${SEED} numRuns=${RUNS} (rerun with SLUICE_FUZZ_SEED=${SEED})`);

// ── address generators ────────────────────────────────────────────────────────────────────────────

const byte = fc.integer({ min: 0, max: 255 });
const hex16 = fc.integer({ min: 0, max: 0xffff });
const h = (n: number): string => n.toString(16);
const v4Parts = (v4: string): number[] => v4.split('.').map(Number);
const v4Word = (v4: string, word: 0 | 1, xor = 0): number => {
  const [a = 0, b = 0, c = 0, d = 0] = v4Parts(v4).map((x) => x ^ xor);
  return word === 0 ? (a << 8) | b : (c << 8) | d;
};

/** IPv4 addresses biased towards every special range, plus uniform ones. */
const specialV4 = fc.constantFrom(
  '0.0.0.0', '0.1.2.3', '10.0.0.1', '100.64.0.1', '100.127.255.254', '127.0.0.1', '127.255.255.254', '169.254.169.254',
  '172.16.0.1', '172.31.255.255', '192.0.0.8', '192.0.2.1', '192.88.99.1', '192.168.1.1', '198.18.0.1', '198.51.100.7',
  '203.0.113.9', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255', '8.8.8.8', '1.1.1.1', '93.184.216.34',
);
const anyV4 = fc.oneof(fc.ipV4(), specialV4, fc.tuple(byte, byte, byte, byte).map((p) => p.join('.')));

type Embedding = 'mapped' | 'compatible' | 'nat64' | '6to4' | 'teredo';

/** The five IPv6 forms that carry an IPv4 address, each built from `v4` (and random filler where the form has some). */
const embedded = fc
  .tuple(anyV4, fc.constantFrom<Embedding>('mapped', 'compatible', 'nat64', '6to4', 'teredo'), anyV4, hex16, hex16, hex16, fc.boolean())
  .filter(([v4, form]) => !(form === 'compatible' && (v4 === '0.0.0.0' || v4 === '0.0.0.1'))) // ::, ::1 are their own addresses
  .map(([v4, form, server, f1, f2, f3, dotted]) => {
    const hi = h(v4Word(v4, 0));
    const lo = h(v4Word(v4, 1));
    const tail = dotted ? v4 : `${hi}:${lo}`;
    let address: string;
    switch (form) {
      case 'mapped': address = `::ffff:${tail}`; break; // RFC 4291 §2.5.5.2
      case 'compatible': address = `::${hi}:${lo}`; break; // RFC 4291 §2.5.5.1 (deprecated)
      case 'nat64': address = `64:ff9b::${tail}`; break; // RFC 6052 well-known prefix
      case '6to4': address = `2002:${hi}:${lo}:${h(f1)}:${h(f2)}::${h(f3)}`; break; // RFC 3056: 2002:V4ADDR::/48
      case 'teredo': // RFC 4380: 2001:0:server:flags:~port:~client
        address = `2001:0:${h(v4Word(server, 0))}:${h(v4Word(server, 1))}:${h(f1)}:${h(f2)}:${h(v4Word(v4, 0, 0xff))}:${h(v4Word(v4, 1, 0xff))}`;
        break;
    }
    return { v4, form, address };
  });

const specialV6 = fc.constantFrom(
  '::', '::1', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'fec0::1', 'ff02::1', 'ff0e::fb', '2001:db8::1', '100::1', '2001:2::1',
  '2001:10::1', '2001:20::1', '3fff::1', '5f00::1', '64:ff9b:1::1', '2606:4700::1111', '2a00:1450::1', '4000::1', 'e000::1',
);
const anyV6 = fc.oneof(fc.ipV6(), specialV6, embedded.map((e) => e.address));

// ── 1. the address classifier ─────────────────────────────────────────────────────────────────────

describe('address classifier (fast-check)', () => {
  it('is total: every IPv4, IPv6 or junk string gets exactly one known class and never throws', () => {
    const input = fc.oneof(anyV4, anyV6, fc.ipV4Extended(), fc.string(), fc.string({ unit: 'binary', maxLength: 60 }), fc.ipV6().map((a) => a.toUpperCase()));
    fc.assert(
      fc.property(input, (ip) => {
        const { class: cls, effective } = classifyAddress(ip);
        expect(ADDRESS_CLASSES).toContain(cls);
        expect(cls).not.toBe('self'); // self depends on the listener set, never on the address alone
        expect(typeof effective).toBe('string');
      }),
      params(),
    );
  });

  it('gives an IPv4 address embedded in IPv6 (mapped, compatible, NAT64, 6to4, Teredo) the IPv4 address’s class', () => {
    fc.assert(
      fc.property(embedded, ({ v4, address }) => {
        const inner = classifyAddress(v4);
        const outer = classifyAddress(address);
        expect({ address, class: outer.class, effective: outer.effective }).toEqual({ address, class: inner.class, effective: v4 });
      }),
      params(),
    );
  });

  it('does not depend on how an address is spelled (compressed, expanded, upper case)', () => {
    fc.assert(
      fc.property(anyV6, (address) => {
        const expanded = ipaddr.parse(address).toNormalizedString();
        const base = classifyAddress(address).class;
        expect(classifyAddress(expanded).class).toBe(base);
        expect(classifyAddress(expanded.toUpperCase()).class).toBe(base);
      }),
      params(),
    );
  });
});

// ── 2. the reason-code table and Proxy-Status ─────────────────────────────────────────────────────

const ALLOWED_STATUS = new Set([200, 400, 403, 407, 408, 417, 429, 500, 502, 503, 504]);
/** RFC 9209 §2.3 proxy error types (IANA "HTTP Proxy-Status Parameters / Proxy Error Types"). */
const RFC9209_ERROR_TYPES = new Set([
  'dns_timeout', 'dns_error', 'destination_not_found', 'destination_unavailable', 'destination_ip_prohibited',
  'destination_ip_unroutable', 'connection_refused', 'connection_terminated', 'connection_timeout', 'connection_read_timeout',
  'connection_write_timeout', 'connection_limit_reached', 'tls_protocol_error', 'tls_certificate_error', 'tls_alert_received',
  'http_request_error', 'http_request_denied', 'http_response_incomplete', 'http_response_header_section_size',
  'http_response_header_size', 'http_response_body_size', 'http_response_trailer_section_size', 'http_response_trailer_size',
  'http_response_transfer_coding', 'http_response_content_coding', 'http_response_timeout', 'http_upgrade_failed',
  'http_protocol_error', 'proxy_internal_response', 'proxy_internal_error', 'proxy_configuration_error', 'proxy_loop_detected',
]);
/** Codes that docs/reason-codes.md says carry no `error` parameter. */
const NO_ERROR_TYPE = new Set<ReasonCode>(['granted', 'client_gone']);

// RFC 8941 §3.3.4 sf-token, §3.1.2 key, §3.3.3 sf-string, §3.3 bare items.
const TOKEN = String.raw`[A-Za-z*][!#$%&'*+\-.^_` + '`' + String.raw`|~0-9A-Za-z:/]*`;
const KEY = String.raw`[a-z*][a-z0-9_\-.*]*`;
const SF_STRING = String.raw`"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\\"])*"`;
const BARE = `(?:${TOKEN}|${SF_STRING}|-?\\d{1,15}(?:\\.\\d{1,3})?|\\?[01]|:[A-Za-z0-9+/=]*:)`;
const MEMBER = new RegExp(`^(${TOKEN}|${SF_STRING})((?:;\\x20*${KEY}(?:=${BARE})?)*)$`);
const PARAM = new RegExp(`;\\x20*(${KEY})(?:=(${BARE}))?`, 'g');

/** Parses one Proxy-Status sf-list member into its item and parameters, or null when the syntax is wrong. */
function parseProxyStatusMember(value: string): { item: string; params: Map<string, string> } | null {
  const match = MEMBER.exec(value);
  if (match === null) return null;
  const params = new Map<string, string>();
  for (const p of (match[2] ?? '').matchAll(PARAM)) {
    if (params.has(p[1] ?? '')) return null; // RFC 8941 §3.1.2: keys are unique (we also never emit duplicates)
    params.set(p[1] ?? '', p[2] ?? '?1');
  }
  return { item: match[1] ?? '', params };
}

describe('reason codes and Proxy-Status (RFC 9209)', () => {
  const codes = Object.keys(Reasons) as ReasonCode[];

  it('every code has a status in {200,400,403,407,408,417,429,500,502,503,504} and a non-empty one-line message', () => {
    expect(codes.length).toBeGreaterThan(10);
    for (const code of codes) {
      expect(isReasonCode(code)).toBe(true);
      expect(code).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(ALLOWED_STATUS, code).toContain(Reasons[code].status);
      expect(Reasons[code].message.trim().length, code).toBeGreaterThan(0);
      expect(Reasons[code].message, code).not.toMatch(/[\r\n]/);
    }
  });

  // Audit-only codes are never sent (review 2026-12 finding 13): only the codes a client can see are formatted.
  const sentCodes = codes.filter((code) => sentReason(code) === code);

  it('proxyStatus() formats each code as an sf-list member `sluice; error=<RFC 9209 type>; details="<code>"`', () => {
    fc.assert(
      fc.property(fc.constantFrom(...sentCodes), (code) => {
        const value = proxyStatus(code);
        expect(value).not.toMatch(/[\r\n\0]/);
        const member = parseProxyStatusMember(value);
        expect(member, `${code}: ${value}`).not.toBeNull();
        if (member === null) return;
        expect(member.item).toBe('sluice');
        expect(member.params.get('details')).toBe(`"${code}"`);
        const error = member.params.get('error');
        if (NO_ERROR_TYPE.has(code)) {
          expect(error, code).toBeUndefined();
        } else {
          expect(error, `${code} has no RFC 9209 error type`).toBeDefined();
          expect(error).toMatch(new RegExp(`^${TOKEN}$`)); // §2.1.1: error is a Token, not a String
          expect(RFC9209_ERROR_TYPES, `${code} → ${error}`).toContain(error);
          if (Reasons[code].status === 504) expect(error, code).toMatch(/timeout$/);
        }
        expect([...member.params.keys()].every((k) => k === 'error' || k === 'details')).toBe(true);
      }),
      params(Math.max(200, codes.length * 4)),
    );
  });

  it('the denial body is one line naming the code sent, whatever the destination key, grant id and answers; never an address', () => {
    const grantId = fc.stringMatching(/^[A-Za-z0-9_.-]{1,40}$/);
    const SECRET_ADDRESSES = ['203.0.113.77', 'fd00::7a', '::ffff:7f00:2'];
    const answers = fc.array(fc.record({ address: fc.constantFrom(...SECRET_ADDRESSES), class: fc.constantFrom(...ADDRESS_CLASSES), allowed: fc.boolean() }), { maxLength: 4 });
    const request = fc.constantFrom('connect' as const, 'forward' as const);
    const scheme = fc.option(fc.constantFrom('http' as const, 'https' as const, 'ws' as const, 'wss' as const, 'tcp' as const));
    fc.assert(
      fc.property(fc.constantFrom(...codes), fc.option(fc.domain().map((d) => `${d}:443`)), fc.option(grantId), answers, request, scheme, (reason, destination, grant, addresses, kind, sch) => {
        const body = denialBody({ reason, canonical: destination, principal: grant, addresses, request: kind, scheme: sch });
        expect(body.endsWith('\n')).toBe(true);
        expect(body.slice(0, -1)).not.toMatch(/[\r\n]/);
        const sent = sentReason(reason);
        expect(body.startsWith(`sluice: ${Reasons[sent].status} ${sent}: `)).toBe(true);
        expect(body).toMatch(/; fix: [^\n]+\n$/);
        for (const auditOnly of Object.keys(AuditOnlyReasons)) expect(body).not.toContain(auditOnly);
        for (const address of SECRET_ADDRESSES) expect(body).not.toContain(address);
      }),
      params(500),
    );
  });
});

// ── 3. request-target parsers ─────────────────────────────────────────────────────────────────────

const hostile = fc.constantFrom('%', '%25', '@', ':', '[', ']', '/', '\\', '#', '?', ' ', '\t', '\n', '\r', '\0', '*', '.', '。', '％', '：', '\u200b', 'xn--', '0x', '\u00ff', '\ufffd', '::');
const port = fc.oneof(
  fc.integer({ min: 0, max: 70000 }).map(String),
  fc.constantFrom('', '0', '443', '0443', '+443', '443abc', ' 443', '65535', '65536', '99999999999', '-1', '4_43', '٤٤٣'),
);
const hostText = fc.oneof(
  fc.domain(),
  fc.mixedCase(fc.domain()),
  fc.domain().map((d) => `${d}.`),
  fc.ipV4(),
  fc.ipV4Extended(),
  fc.ipV6().map((a) => `[${a}]`),
  fc.ipV4().map((a) => `[::ffff:${a}]`),
  fc.ipV6().map((a) => `[${a}%25eth0]`),
  fc.string({ maxLength: 20 }),
);
const mutate = (base: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(base, fc.array(fc.tuple(hostile, fc.nat()), { maxLength: 3 })).map(([text, inserts]) =>
    inserts.reduce((s, [ins, at]) => s.slice(0, at % (s.length + 1)) + ins + s.slice(at % (s.length + 1)), text),
  );
const authority = mutate(fc.tuple(fc.option(fc.constantFrom('user@', 'u:p@', '@')), hostText, fc.option(port)).map(([u, hst, p]) => `${u ?? ''}${hst}${p === null ? '' : `:${p}`}`));
const connectTarget = fc.oneof(authority, fc.string(), fc.string({ unit: 'binary', maxLength: 80 }), fc.webAuthority({ withPort: true, withUserInfo: true }));
const absoluteTarget = fc.oneof(
  fc.tuple(fc.constantFrom('http', 'HTTP', 'Http', 'ws', 'WS', 'https', 'wss', 'ftp', 'h', 'http+unix'), authority, fc.oneof(fc.constant(''), fc.webPath(), fc.webQueryParameters().map((q) => `?${q}`), fc.string({ maxLength: 20 })))
    .map(([scheme, auth, rest]) => `${scheme}://${auth}${rest}`),
  fc.webUrl({ withQueryParameters: true, withFragments: true, authoritySettings: { withUserInfo: true, withPort: true }, validSchemes: ['http', 'ws', 'https', 'ftp'] }),
  mutate(fc.webUrl({ validSchemes: ['http', 'ws'] })),
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 80 }),
);

function sameDestination(a: CanonicalDestination, b: CanonicalDestination): void {
  expect({ key: b.key, host: b.host, hostKind: b.hostKind, port: b.port }).toEqual({ key: a.key, host: a.host, hostKind: a.hostKind, port: a.port });
}

describe('request-target parsers (fast-check)', () => {
  it('parseConnectTarget never throws, and what it accepts re-parses from its key to the same destination', () => {
    fc.assert(
      fc.property(connectTarget, (raw) => {
        const first = parseConnectTarget(raw);
        if (!first.ok) {
          expect(isReasonCode(first.reason)).toBe(true);
          return;
        }
        const dest = first.value;
        expect(dest.port).toBeGreaterThanOrEqual(1);
        expect(dest.port).toBeLessThanOrEqual(65535);
        expect(dest.key).not.toMatch(/[\s@/\\?#%]/);
        const again = parseConnectTarget(dest.key);
        expect(again.ok, `${JSON.stringify(raw)} → ${dest.key} is not accepted again`).toBe(true);
        if (again.ok) sameDestination(dest, again.value);
      }),
      params(RUNS * 2),
    );
  });

  it('parseAbsoluteTarget never throws, and what it accepts re-parses from scheme://key/path to the same target', () => {
    fc.assert(
      fc.property(absoluteTarget, (raw) => {
        const first = parseAbsoluteTarget(raw);
        if (!first.ok) {
          expect(isReasonCode(first.reason)).toBe(true);
          return;
        }
        const { scheme, destination, pathAndQuery } = first.value;
        expect(['http', 'ws']).toContain(scheme);
        expect(pathAndQuery.startsWith('/')).toBe(true);
        const again = parseAbsoluteTarget(`${scheme}://${destination.key}${pathAndQuery}`);
        expect(again.ok, `${JSON.stringify(raw)} → ${destination.key} is not accepted again`).toBe(true);
        if (!again.ok) return;
        expect(again.value.scheme).toBe(scheme);
        expect(again.value.pathAndQuery).toBe(pathAndQuery);
        sameDestination(destination, again.value.destination);
      }),
      params(RUNS * 2),
    );
  });
});

// ── 4. pinning: no forbidden-class address is ever pinned ─────────────────────────────────────────

const NEVER = new Set<AddressClass>(['unspecified', 'multicast', 'self']);
const SELF_PORT = 3180;
const EXACT_SELF = { v4: '192.0.2.10', v4Port: 9464, v6: '2001:db8::5', v6Port: 8443 };
/** The host's own interface addresses (class host), injected so the oracle does not depend on this machine. */
const HOST = { v4: '11.22.33.44', v6: '2a01:4f8:1:2::44', private: '10.20.30.40' };
const HOST_EFFECTIVE = new Set(Object.values(HOST));
const self = new SelfAddresses(
  [`127.0.0.1:${SELF_PORT}`, `${EXACT_SELF.v4}:${EXACT_SELF.v4Port}`, `[${EXACT_SELF.v6}]:${EXACT_SELF.v6Port}`],
  new HostAddresses(() => ({ lo: [{ address: '127.0.0.1' }, { address: '::1' }], eth0: Object.values(HOST).map((address) => ({ address })) })),
);

interface Cidr {
  readonly text: string;
  readonly net: ipaddr.IPv4 | ipaddr.IPv6;
  readonly prefix: number;
}

// CIDR bases are built from bytes so the oracle's parser (ipaddr.js) and Node's BlockList read them alike.
const v4Cidr = fc.tuple(fc.oneof(fc.ipV4(), specialV4), fc.integer({ min: 0, max: 32 })).map(([a, p]): Cidr => ({ text: `${a}/${p}`, net: ipaddr.parse(a), prefix: p }));
const v6Base = fc.oneof(
  fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => ipaddr.fromByteArray([...b]) as ipaddr.IPv6),
  specialV6.map((a) => ipaddr.parse(a) as ipaddr.IPv6),
);
const v6Cidr = fc
  .tuple(v6Base, fc.integer({ min: 0, max: 128 }))
  .map(([a, p]): Cidr => ({ text: `${a.toString()}/${p}`, net: a, prefix: p }))
  // A v6 CIDR that covers part of ::ffff:0:0/96 is covered by its own deterministic test below.
  .filter((c) => !coversMapped(c));
const cidr = fc.oneof(v4Cidr, v6Cidr, fc.constantFrom<Cidr>(
  { text: '0.0.0.0/0', net: ipaddr.parse('0.0.0.0'), prefix: 0 },
  { text: '127.0.0.0/8', net: ipaddr.parse('127.0.0.0'), prefix: 8 },
  { text: '224.0.0.0/4', net: ipaddr.parse('224.0.0.0'), prefix: 4 },
  { text: '192.0.2.10/32', net: ipaddr.parse('192.0.2.10'), prefix: 32 },
  { text: 'ff00::/8', net: ipaddr.parse('ff00::'), prefix: 8 },
  { text: 'fe80::/10', net: ipaddr.parse('fe80::'), prefix: 10 },
));

const MAPPED_NET = ipaddr.parse('::ffff:0:0') as ipaddr.IPv6;
function coversMapped(c: Cidr): boolean {
  if (c.net.kind() !== 'ipv6') return false;
  const prefix = Math.min(c.prefix, 96);
  return MAPPED_NET.match(c.net as ipaddr.IPv6, prefix);
}

/** The documented meaning of allowAddresses: the effective address (embedded IPv4 unwrapped) in a CIDR of its family. */
function inAnyCidr(effective: string, cidrs: readonly Cidr[]): boolean {
  const addr = ipaddr.parse(effective);
  return cidrs.some((c) => c.net.kind() === addr.kind() && addr.match(c.net as never, c.prefix));
}

const answer = fc.oneof(
  anyV4,
  anyV6,
  fc.constantFrom(EXACT_SELF.v4, EXACT_SELF.v6, `::ffff:${EXACT_SELF.v4}`, '127.0.0.1', '::1', '0.0.0.0', '::ffff:127.0.0.1'),
  fc.constantFrom(HOST.v4, HOST.v6, HOST.private, `::ffff:${HOST.v4}`, '64:ff9b::b16:212c', '2002:b16:212c::1', `::ffff:${HOST.private}`),
);
const policyInput = fc.record({
  classes: fc.subarray([...ADDRESS_CLASSES, 'bogus']),
  cidrs: fc.array(cidr, { maxLength: 4 }),
});

describe('pin() (fast-check)', () => {
  it('pins exactly the answers that classifyAddress + the grant policy allow, in order, and never an unspecified, multicast or self address, nor a host address without host', () => {
    const destPort = fc.constantFrom(443, 80, SELF_PORT, EXACT_SELF.v4Port, EXACT_SELF.v6Port, 8080);
    fc.assert(
      fc.property(fc.array(answer, { minLength: 1, maxLength: 8 }), policyInput, destPort, (addresses, input, portNumber) => {
        const compiled = compileAddressPolicy(input.classes, input.cidrs.map((c) => c.text), self);
        expect(compiled.ok).toBe(true);
        if (!compiled.ok) return;
        const policy: AddressPolicy = compiled.value;
        const answers: ResolvedAddress[] = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        const dest = { host: 'fuzz.test', hostKind: 'name', port: portNumber, key: `fuzz.test:${portNumber}` } as CanonicalDestination;
        const { verdict, classified } = pin(dest, answers, policy);

        // The oracle: public plus the grantable classes the grant names, or a CIDR of the effective address's
        // family; a host address only when the grant names host (no range class or CIDR admits it).
        const granted = new Set<string>(['public', ...input.classes.filter((c) => (GRANTABLE_CLASSES as readonly string[]).includes(c))]);
        const expected = answers.filter((a) => {
          const { class: base, effective } = classifyAddress(a.address);
          if (NEVER.has(base) || self.has(effective, base, portNumber)) return false;
          if (HOST_EFFECTIVE.has(effective)) return granted.has('host');
          return granted.has(base) || inAnyCidr(effective, input.cidrs);
        });
        const pinned = verdict.ok ? verdict.value : [];
        expect(pinned.map((p) => p.address)).toEqual(expected.map((a) => a.address));
        expect(classified.map((c) => c.address)).toEqual(addresses);
        for (const p of pinned) {
          expect(NEVER.has(p.class), `${p.address} pinned as ${p.class}`).toBe(false);
          expect(p.port).toBe(portNumber);
          const { class: base, effective } = classifyAddress(p.address);
          expect(['unspecified', 'multicast']).not.toContain(base);
          expect(self.has(effective, base, portNumber), `${p.address}:${portNumber} is Sluice itself`).toBe(false);
          expect(p.class === 'host', `${p.address} pinned as ${p.class}`).toBe(HOST_EFFECTIVE.has(effective));
        }
        if (!verdict.ok) {
          expect(['address_class_denied', 'address_self']).toContain(verdict.reason);
          expect(verdict.reason === 'address_self').toBe(classified.some((c) => c.class === 'self'));
        }
      }),
      params(),
    );
  });

  it('an IPv6 CIDR over the mapped range (::ffff:0:0/96, ::/0) does not admit the IPv4 loopback or metadata address (docs/configuration.md, allowAddresses)', () => {
    // "An IPv6 address that embeds an IPv4 address is checked by the embedded IPv4 address only, so a
    // CIDR over the IPv6 form … does not admit the address it embeds."
    const dest = { host: 'fuzz.test', hostKind: 'name', port: 443, key: 'fuzz.test:443' } as CanonicalDestination;
    for (const text of ['::ffff:0:0/96', '::ffff:127.0.0.0/104', '::/0']) {
      const compiled = compileAddressPolicy([], [text], self);
      if (!compiled.ok) throw new Error(`policy ${text} did not compile`);
      for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '169.254.169.254', '::ffff:169.254.169.254']) {
        const { verdict } = pin(dest, [{ address, family: address.includes(':') ? 6 : 4 }], compiled.value);
        expect(verdict.ok, `allowAddresses [${text}] admits ${address}`).toBe(false);
      }
    }
  });
});
