// Owns the throwaway test PKI: one root CA per process and cached leaf certificates (node-forge).
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import forge from 'node-forge';

export interface TestPki {
  caPem: string;
  certPem: string;
  keyPem: string;
  caFile: string;
}

interface KeyMaterial {
  privateKey: forge.pki.rsa.PrivateKey;
  publicKey: forge.pki.rsa.PublicKey;
  keyPem: string;
}

interface CaMaterial extends KeyMaterial {
  cert: forge.pki.Certificate;
  caPem: string;
  caFile: string;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const cache = new Map<string, TestPki>();
let ca: CaMaterial | undefined;
let leafKey: KeyMaterial | undefined;
let tempDir: string | undefined;

// Node's native RSA keygen is far faster than forge's pure-JS one; forge still builds and signs the certs.
function newKey(): KeyMaterial {
  const { privateKey: keyPem } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const privateKey = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  const publicKey = forge.pki.rsa.setPublicKey(privateKey.n, privateKey.e);
  return { privateKey, publicKey, keyPem };
}

function ensureTempDir(): string {
  if (tempDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-test-pki-'));
    tempDir = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return tempDir;
}

function randomSerial(): string {
  // Leading 01 keeps the DER integer positive.
  return '01' + forge.util.bytesToHex(forge.random.getBytesSync(15));
}

function baseCert(publicKey: forge.pki.rsa.PublicKey): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = randomSerial();
  const now = Date.now();
  cert.validity.notBefore = new Date(now - DAY_MS);
  cert.validity.notAfter = new Date(now + 2 * DAY_MS);
  return cert;
}

function getCa(): CaMaterial {
  if (ca !== undefined) return ca;
  const key = newKey();
  const cert = baseCert(key.publicKey);
  const subject = [
    { name: 'commonName', value: 'Sluice Test Root CA' },
    { name: 'organizationName', value: 'Sluice Tests' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(key.privateKey, forge.md.sha256.create());
  const caPem = forge.pki.certificateToPem(cert);
  const caFile = join(ensureTempDir(), 'ca.pem');
  writeFileSync(caFile, caPem);
  ca = { ...key, cert, caPem, caFile };
  return ca;
}

function altName(name: string): { type: number; value?: string; ip?: string } {
  return isIP(name) !== 0 ? { type: 7, ip: name } : { type: 2, value: name };
}

/** Returns a CA plus a leaf cert for `names` (DNS names and/or IP literals); cached per names list. */
export function createTestPki(names: string[]): TestPki {
  if (names.length === 0) throw new Error('createTestPki: at least one name is required');
  const cacheKey = JSON.stringify(names);
  const hit = cache.get(cacheKey);
  if (hit !== undefined) return hit;

  const root = getCa();
  leafKey ??= newKey();
  const cert = baseCert(leafKey.publicKey);
  cert.setSubject([{ name: 'commonName', value: names[0] ?? 'sluice-test-leaf' }]);
  cert.setIssuer(root.cert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: names.map(altName) },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: root.cert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(root.privateKey, forge.md.sha256.create());

  const pki: TestPki = {
    caPem: root.caPem,
    certPem: forge.pki.certificateToPem(cert),
    keyPem: leafKey.keyPem,
    caFile: root.caFile,
  };
  cache.set(cacheKey, pki);
  return pki;
}
