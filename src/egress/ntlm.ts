// NTLM messages for authenticating to an upstream proxy (MS-NLMP): the NEGOTIATE, CHALLENGE and
// AUTHENTICATE codec and the NTLMv2 responses. NTLMv2 only: never LM or NTLMv1 (MS-NLMP 3.3.1), whose
// responses are crackable offline from one captured exchange. Never throws on a peer's bytes, and never
// puts a password or a key into an error string.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { md4 } from './md4.js';

export interface NtlmCredentials { readonly user: string; readonly domain: string; readonly password: string; readonly workstation?: string }
export interface NtlmChallenge { readonly serverChallenge: Buffer; readonly flags: number; readonly targetName: string; readonly targetInfo: Buffer }
/** An AUTHENTICATE_MESSAGE's fields (MS-NLMP 2.2.1.3), as a server (the test fixture) reads them. */
export interface NtlmAuthenticate {
  readonly flags: number; readonly lmResponse: Buffer; readonly ntResponse: Buffer;
  readonly domain: string; readonly user: string; readonly workstation: string;
}

/** NegotiateFlags bits (MS-NLMP 2.2.2.5). */
export const NTLM_FLAGS = {
  UNICODE: 0x00000001, OEM: 0x00000002, REQUEST_TARGET: 0x00000004, NTLM: 0x00000200,
  ALWAYS_SIGN: 0x00008000, TARGET_TYPE_DOMAIN: 0x00010000, TARGET_TYPE_SERVER: 0x00020000,
  EXTENDED_SESSIONSECURITY: 0x00080000, TARGET_INFO: 0x00800000, VERSION: 0x02000000,
} as const;

/** AV_PAIR ids (MS-NLMP 2.2.2.1) this module reads or the fixture writes. */
export const AV_ID = { EOL: 0, NB_COMPUTER_NAME: 1, NB_DOMAIN_NAME: 2, DNS_COMPUTER_NAME: 3, DNS_DOMAIN_NAME: 4, TIMESTAMP: 7 } as const;

const SIGNATURE = Buffer.from('NTLMSSP\0', 'latin1');
const NEGOTIATE_FLAGS = NTLM_FLAGS.UNICODE | NTLM_FLAGS.OEM | NTLM_FLAGS.REQUEST_TARGET | NTLM_FLAGS.NTLM | NTLM_FLAGS.ALWAYS_SIGN | NTLM_FLAGS.EXTENDED_SESSIONSECURITY;
/** What the AUTHENTICATE message may echo: no SIGN, SEAL, KEY_EXCH or VERSION, since HTTP uses none of them. */
const AUTHENTICATE_FLAGS = NEGOTIATE_FLAGS | NTLM_FLAGS.TARGET_INFO;
const CHALLENGE_HEADER_BYTES = 48;
/** Signature, type, TargetNameFields, flags, ServerChallenge: the oldest challenge layout. */
const LEGACY_CHALLENGE_BYTES = 32;
const AUTHENTICATE_HEADER_BYTES = 64;
/** Milliseconds between 1601-01-01 (FILETIME's epoch) and 1970-01-01. */
const FILETIME_EPOCH_OFFSET_MS = 11_644_473_600_000n;

function hmacMd5(key: Buffer, ...data: Buffer[]): Buffer {
  const hmac = createHmac('md5', key);
  for (const part of data) hmac.update(part);
  return hmac.digest();
}

function header(type: number, size: number): Buffer {
  const message = Buffer.alloc(size);
  SIGNATURE.copy(message, 0);
  message.writeUInt32LE(type, 8);
  return message;
}

/** A field descriptor (Len, MaxLen, BufferOffset; MS-NLMP 2.2.1) read only when it lies inside `message`. */
function readField(message: Buffer, at: number, minOffset: number): Buffer | null {
  const length = message.readUInt16LE(at);
  const offset = message.readUInt32LE(at + 4);
  if (length === 0) return Buffer.alloc(0);
  if (offset < minOffset || offset + length > message.length) return null;
  return message.subarray(offset, offset + length);
}

function decodeString(bytes: Buffer, isUnicode: boolean): string | null {
  if (!isUnicode) return bytes.toString('latin1');
  return bytes.length % 2 === 0 ? bytes.toString('utf16le') : null;
}

/** Type 1 (MS-NLMP 2.2.1.1): no domain or workstation is supplied, so nothing about the host leaks. */
export function ntlmNegotiateMessage(): Buffer {
  const message = header(1, 32);
  message.writeUInt32LE(NEGOTIATE_FLAGS >>> 0, 12);
  return message;
}

/**
 * Walks an AV_PAIR list (MS-NLMP 2.2.2.1): each pair must lie inside the buffer and the list must end with
 * exactly one MsvAvEOL at its last four bytes. Returns the pairs, or null when malformed.
 */
export function parseAvPairs(info: Buffer): Map<number, Buffer> | null {
  const pairs = new Map<number, Buffer>();
  let at = 0;
  while (at + 4 <= info.length) {
    const id = info.readUInt16LE(at);
    const length = info.readUInt16LE(at + 2);
    if (at + 4 + length > info.length) return null;
    if (id === AV_ID.EOL) return length === 0 && at + 4 === info.length ? pairs : null;
    if (id === AV_ID.TIMESTAMP && length !== 8) return null;
    if (!pairs.has(id)) pairs.set(id, info.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return null;
}

/** Type 2 (MS-NLMP 2.2.1.2). Null for anything malformed: every offset and length is bounds-checked. */
export function parseNtlmChallenge(message: Buffer): NtlmChallenge | null {
  if (message.length < LEGACY_CHALLENGE_BYTES || !message.subarray(0, 8).equals(SIGNATURE)) return null;
  if (message.readUInt32LE(8) !== 2) return null;
  const flags = message.readUInt32LE(20);
  // TargetInfoFields mean something only with NEGOTIATE_TARGET_INFO (MS-NLMP 2.2.1.2); older servers
  // (Squid's helpers among them) send a 32- or 40-byte header without them and the payload right after.
  // NTLMv2 is then computed over an empty target info.
  const hasTargetInfo = (flags & NTLM_FLAGS.TARGET_INFO) !== 0;
  if (hasTargetInfo && message.length < CHALLENGE_HEADER_BYTES) return null;
  const targetInfoBytes = hasTargetInfo ? readField(message, 40, CHALLENGE_HEADER_BYTES) : Buffer.alloc(0);
  if (targetInfoBytes === null) return null;
  // The target name is informational (the client's own domain goes into NTLMv2), and some servers send
  // a bogus offset for it (Squid's ntlm_fake_auth does): an unreadable one reads as empty, not a refusal.
  const targetNameBytes = readField(message, 12, hasTargetInfo ? CHALLENGE_HEADER_BYTES : LEGACY_CHALLENGE_BYTES) ?? Buffer.alloc(0);
  const targetName = decodeString(targetNameBytes, (flags & NTLM_FLAGS.UNICODE) !== 0) ?? '';
  // NTLMv2's proof covers the target info (MS-NLMP 3.1.5.1.2), so a list we cannot walk is refused.
  if (targetInfoBytes.length > 0 && parseAvPairs(targetInfoBytes) === null) return null;
  return {
    serverChallenge: Buffer.from(message.subarray(24, 32)),
    flags,
    targetName,
    targetInfo: Buffer.from(targetInfoBytes),
  };
}

/** NTOWFv2 = LMOWFv2 (MS-NLMP 3.3.2): HMAC_MD5(MD4(UNICODE(Passwd)), UNICODE(Uppercase(User) ‖ UserDom)). */
export function ntowfV2(password: string, user: string, domain: string): Buffer {
  return hmacMd5(md4(Buffer.from(password, 'utf16le')), Buffer.from(user.toUpperCase() + domain, 'utf16le'));
}

/** LMv2_RESPONSE (MS-NLMP 2.2.2.4, 3.3.2): HMAC_MD5(ResponseKeyLM, ServerChallenge ‖ ClientChallenge) ‖ ClientChallenge. */
export function lmV2Response(responseKey: Buffer, serverChallenge: Buffer, clientChallenge: Buffer): Buffer {
  return Buffer.concat([hmacMd5(responseKey, serverChallenge, clientChallenge), clientChallenge]);
}

/** The NTLMv2_CLIENT_CHALLENGE "temp" (MS-NLMP 2.2.2.7, 3.3.2): 1, 1, Z(6), Time, ClientChallenge, Z(4), ServerName, Z(4). */
export function ntlmV2Blob(timestamp: Buffer, clientChallenge: Buffer, targetInfo: Buffer): Buffer {
  return Buffer.concat([Buffer.from([1, 1, 0, 0, 0, 0, 0, 0]), timestamp, clientChallenge, Buffer.alloc(4), targetInfo, Buffer.alloc(4)]);
}

/**
 * NtChallengeResponse (MS-NLMP 2.2.2.8, 3.3.2): NTProofStr ‖ temp, where NTProofStr =
 * HMAC_MD5(ResponseKeyNT, ServerChallenge ‖ temp). A server verifies by recomputing it over the temp it got.
 */
export function ntlmV2Response(responseKey: Buffer, serverChallenge: Buffer, blob: Buffer): Buffer {
  return Buffer.concat([hmacMd5(responseKey, serverChallenge, blob), blob]);
}

/** The current time as a FILETIME: 100 ns ticks since 1601-01-01, little-endian (MS-DTYP 2.3.3). */
export function currentFiletime(nowMs = Date.now()): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE((BigInt(nowMs) + FILETIME_EPOCH_OFFSET_MS) * 10_000n);
  return out;
}

/**
 * Type 3 (MS-NLMP 2.2.1.3, 3.1.5.1.2) with an NTLMv2 response. The time is the server's MsvAvTimestamp
 * when it sent one (then LmChallengeResponse is Z(24), as 3.1.5.1.2 requires), else now. No MIC is
 * sent (it needs the raw NEGOTIATE and CHALLENGE bytes, and HTTP proxies do not require it), so the
 * target info is echoed unchanged (no MsvAvFlags claiming a MIC).
 */
export function ntlmAuthenticateMessage(
  challenge: NtlmChallenge,
  creds: NtlmCredentials,
  options: { clientChallenge?: Buffer; timestamp?: Buffer } = {},
): Buffer {
  const clientChallenge = options.clientChallenge ?? randomBytes(8);
  if (clientChallenge.length !== 8) throw new RangeError('NTLM client challenge must be 8 bytes');
  const serverTimestamp = challenge.targetInfo.length > 0 ? parseAvPairs(challenge.targetInfo)?.get(AV_ID.TIMESTAMP) : undefined;
  const timestamp = options.timestamp ?? serverTimestamp ?? currentFiletime();
  if (timestamp.length !== 8) throw new RangeError('NTLM timestamp must be 8 bytes');
  const key = ntowfV2(creds.password, creds.user, creds.domain);
  const nt = ntlmV2Response(key, challenge.serverChallenge, ntlmV2Blob(timestamp, clientChallenge, challenge.targetInfo));
  const lm = serverTimestamp === undefined ? lmV2Response(key, challenge.serverChallenge, clientChallenge) : Buffer.alloc(24);
  const isUnicode = (challenge.flags & NTLM_FLAGS.UNICODE) !== 0;
  const encoding = isUnicode ? 'utf16le' : 'latin1';
  const flags = ((challenge.flags & AUTHENTICATE_FLAGS) | (isUnicode ? NTLM_FLAGS.UNICODE : NTLM_FLAGS.OEM)) >>> 0;
  const strings = [creds.domain, creds.user, creds.workstation ?? ''].map((s) => Buffer.from(s, encoding));
  // Field descriptors in MS-NLMP 2.2.1.3 order: LM, NT, domain, user, workstation, session key.
  const payloads = [lm, nt, ...strings, Buffer.alloc(0)];
  const message = header(3, AUTHENTICATE_HEADER_BYTES);
  let offset = AUTHENTICATE_HEADER_BYTES;
  payloads.forEach((payload, index) => {
    const at = 12 + index * 8;
    message.writeUInt16LE(payload.length, at);
    message.writeUInt16LE(payload.length, at + 2);
    message.writeUInt32LE(offset, at + 4);
    offset += payload.length;
  });
  message.writeUInt32LE(flags, 60);
  return Buffer.concat([message, ...payloads]);
}

/** Type 3 as a server reads it (MS-NLMP 2.2.1.3); null for anything malformed. The test fixture's half. */
export function parseNtlmAuthenticate(message: Buffer): NtlmAuthenticate | null {
  if (message.length < AUTHENTICATE_HEADER_BYTES || !message.subarray(0, 8).equals(SIGNATURE)) return null;
  if (message.readUInt32LE(8) !== 3) return null;
  const flags = message.readUInt32LE(60);
  const isUnicode = (flags & NTLM_FLAGS.UNICODE) !== 0;
  const [lm, nt, domainBytes, userBytes, workstationBytes] = [12, 20, 28, 36, 44].map((at) => readField(message, at, AUTHENTICATE_HEADER_BYTES));
  if (lm == null || nt == null || domainBytes == null || userBytes == null || workstationBytes == null) return null;
  const domain = decodeString(domainBytes, isUnicode);
  const user = decodeString(userBytes, isUnicode);
  const workstation = decodeString(workstationBytes, isUnicode);
  if (domain === null || user === null || workstation === null) return null;
  return { flags, lmResponse: Buffer.from(lm), ntResponse: Buffer.from(nt), domain, user, workstation };
}

/**
 * Verifies an NTLMv2 NtChallengeResponse (MS-NLMP 3.3.2, the server's side of 3.2.5.1.2): recomputes
 * NTProofStr over the client's temp and compares in constant time. An NTLMv1 response (24 bytes) fails.
 */
export function verifyNtlmV2(authenticate: NtlmAuthenticate, serverChallenge: Buffer, password: string): boolean {
  const response = authenticate.ntResponse;
  if (response.length < 16 + 28) return false;
  const blob = response.subarray(16);
  if (blob[0] !== 1 || blob[1] !== 1) return false;
  const expected = ntlmV2Response(ntowfV2(password, authenticate.user, authenticate.domain), serverChallenge, blob);
  return timingSafeEqual(expected.subarray(0, 16), response.subarray(0, 16));
}
