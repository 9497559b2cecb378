// MD4 (RFC 1320) in pure TypeScript, for the NT hash of NTLM (MS-NLMP 3.3.2 NTOWFv2 starts from
// MD4(UNICODE(password))). Node 20's OpenSSL 3 keeps md4 in the legacy provider, so
// createHash('md4') throws "digital envelope routines::unsupported". MD4 is broken as a general hash;
// never use it for anything but the NTLM key derivation it is mandated for.

const S1 = [3, 7, 11, 19] as const;
const S2 = [3, 5, 9, 13] as const;
const S3 = [3, 9, 11, 15] as const;
/** Round 3's word order (RFC 1320 section 3.4). */
const R3 = [0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15] as const;

function rotl(x: number, s: number): number {
  return ((x << s) | (x >>> (32 - s))) >>> 0;
}

/** Processes one 64-byte block at `offset` into `state` (RFC 1320 section 3.4). */
function compress(state: Uint32Array, block: Buffer, offset: number, x: Uint32Array): void {
  for (let i = 0; i < 16; i += 1) x[i] = block.readUInt32LE(offset + i * 4);
  let a = state[0]!;
  let b = state[1]!;
  let c = state[2]!;
  let d = state[3]!;
  // Round 1: F(X,Y,Z) = XY v not(X) Z.
  for (let i = 0; i < 16; i += 1) {
    const t = rotl((a + ((b & c) | (~b & d)) + x[i]!) >>> 0, S1[i % 4]!);
    a = d;
    d = c;
    c = b;
    b = t;
  }
  // Round 2: G(X,Y,Z) = XY v XZ v YZ, plus 0x5A827999.
  for (let i = 0; i < 16; i += 1) {
    const k = (i % 4) * 4 + Math.floor(i / 4);
    const t = rotl((a + ((b & c) | (b & d) | (c & d)) + x[k]! + 0x5a827999) >>> 0, S2[i % 4]!);
    a = d;
    d = c;
    c = b;
    b = t;
  }
  // Round 3: H(X,Y,Z) = X xor Y xor Z, plus 0x6ED9EBA1.
  for (let i = 0; i < 16; i += 1) {
    const t = rotl((a + (b ^ c ^ d) + x[R3[i]!]! + 0x6ed9eba1) >>> 0, S3[i % 4]!);
    a = d;
    d = c;
    c = b;
    b = t;
  }
  state[0] = (state[0]! + a) >>> 0;
  state[1] = (state[1]! + b) >>> 0;
  state[2] = (state[2]! + c) >>> 0;
  state[3] = (state[3]! + d) >>> 0;
}

/** The 16-byte MD4 digest of `data` (RFC 1320). */
export function md4(data: Buffer): Buffer {
  // Padding (RFC 1320 section 3.1-3.2): 0x80, zeros to 56 mod 64, then the bit length as 64-bit LE.
  const padded = Buffer.alloc((Math.floor((data.length + 8) / 64) + 1) * 64);
  data.copy(padded);
  padded[data.length] = 0x80;
  const bits = BigInt(data.length) * 8n;
  padded.writeBigUInt64LE(bits & 0xffffffffffffffffn, padded.length - 8);
  const state = Uint32Array.of(0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476);
  const x = new Uint32Array(16);
  for (let offset = 0; offset < padded.length; offset += 64) compress(state, padded, offset, x);
  const out = Buffer.alloc(16);
  for (let i = 0; i < 4; i += 1) out.writeUInt32LE(state[i]!, i * 4);
  return out;
}
