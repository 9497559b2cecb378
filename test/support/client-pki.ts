// Owns the throwaway PKI of TLS listener tests (issue 28): a server certificate for 127.0.0.1 and
// localhost, a client CA and its client certificates (a URI SAN, none, expired, not yet valid, revoked),
// an unrelated CA with a certificate of its own, and the client CA's CRL. Every file lives in one
// temporary directory that cleanup() (and, as a backstop, the worker's exit) removes. node-forge makes
// the certificates; the CRL, which forge cannot make, is DER built here and signed with node:crypto.
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import forge from 'node-forge';

const DAY_MS = 86_400_000;

/** One certificate with its key, as PEM text and as files. */
export interface IssuedCertificate {
  readonly certPem: string;
  readonly keyPem: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** SHA-256 of the DER certificate, lower-case hex: what a grant's clientCertificate.sha256 names. */
  readonly sha256: string;
  readonly serial: string;
}

export interface CertificateAuthority {
  readonly name: string;
  readonly certPem: string;
  readonly certFile: string;
  readonly cert: forge.pki.Certificate;
  readonly keyPem: string;
}

export interface ClientCertificateOptions {
  /** URI SANs (SPIFFE IDs); none: the certificate has no subjectAltName at all. */
  readonly uris?: readonly string[];
  readonly notBefore?: Date;
  readonly notAfter?: Date;
}

export interface ClientPki {
  readonly dir: string;
  /** Signs the server certificate; what clients pass as --proxy-cacert / proxyTls.ca / cafile. */
  readonly serverCa: CertificateAuthority;
  /** The TLS listener's certificate: SANs 127.0.0.1 and localhost. */
  readonly server: IssuedCertificate;
  /** listeners[].tls.clientCaFile */
  readonly clientCa: CertificateAuthority;
  /** URI SAN spiffe://sluice.test/agent-a. */
  readonly agentA: IssuedCertificate;
  /** URI SAN spiffe://sluice.test/agent-b. */
  readonly agentB: IssuedCertificate;
  /** No subjectAltName: only a SHA-256 can name it. */
  readonly noSan: IssuedCertificate;
  readonly expired: IssuedCertificate;
  readonly notYetValid: IssuedCertificate;
  /** Revoked by `crlFile` (URI SAN spiffe://sluice.test/revoked). */
  readonly revoked: IssuedCertificate;
  /** listeners[].tls.crlFile: the client CA's CRL, revoking `revoked`. */
  readonly crlFile: string;
  /** A CA unrelated to every other. */
  readonly otherCa: CertificateAuthority;
  /** From otherCa, with agentA's URI SAN: what a forger who controls another CA would present. */
  readonly foreign: IssuedCertificate;
  /** A private key that belongs to no certificate here. */
  readonly strayKeyFile: string;
  /** A new certificate from `ca` (a new key), written as `<name>.pem` / `<name>.key`. */
  issue(ca: CertificateAuthority, name: string, options?: ClientCertificateOptions): IssuedCertificate;
  /** A new CA, written as `<name>-ca.pem`. */
  newCa(name: string): CertificateAuthority;
  /** A CRL from `ca` revoking `revoked`, written as `<name>.crl.pem`; returns its path. */
  /** `nextUpdate`: when the CRL stops being current (default in 7 days); null writes a CRL without one. */
  writeCrl(ca: CertificateAuthority, revoked: readonly IssuedCertificate[], name: string, nextUpdate?: Date | null): string;
  cleanup(): void;
}

interface Key {
  readonly pem: string;
  readonly privateKey: forge.pki.rsa.PrivateKey;
  readonly publicKey: forge.pki.rsa.PublicKey;
}

// Node's native RSA key generation; forge's pure-JS one takes seconds per key.
function newKey(): Key {
  const { privateKey: pem } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const privateKey = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  return { pem, privateKey, publicKey: forge.pki.rsa.setPublicKey(privateKey.n, privateKey.e) };
}

function serial(): string {
  // A leading 01 keeps the DER INTEGER positive.
  return '01' + forge.util.bytesToHex(forge.random.getBytesSync(15));
}

function derSha256(cert: forge.pki.Certificate): string {
  const der = forge.asn1.toDer(forge.pki.certificateToAsn1(cert)).getBytes();
  return createHash('sha256').update(Buffer.from(der, 'binary')).digest('hex');
}

interface CaMaterial extends CertificateAuthority {
  readonly key: Key;
}

function makeCa(dir: string, name: string): CaMaterial {
  const key = newKey();
  const cert = forge.pki.createCertificate();
  cert.publicKey = key.publicKey;
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(Date.now() - DAY_MS);
  cert.validity.notAfter = new Date(Date.now() + 30 * DAY_MS);
  const subject = [{ name: 'commonName', value: `Sluice TLS Test ${name} CA` }, { name: 'organizationName', value: 'Sluice Tests' }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(key.privateKey, forge.md.sha256.create());
  const certPem = forge.pki.certificateToPem(cert);
  const certFile = path.join(dir, `${name}-ca.pem`);
  fs.writeFileSync(certFile, certPem);
  return { name, certPem, certFile, cert, keyPem: key.pem, key };
}

type AltName = { type: 2; value: string } | { type: 6; value: string } | { type: 7; ip: string };

function issueLeaf(dir: string, ca: CaMaterial, name: string, usage: 'server' | 'client', altNames: readonly AltName[], notBefore: Date, notAfter: Date): IssuedCertificate {
  const key = newKey();
  const cert = forge.pki.createCertificate();
  cert.publicKey = key.publicKey;
  cert.serialNumber = serial();
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = notAfter;
  // The CN is deliberately a grant-like name: Sluice must never map a principal from it.
  cert.setSubject([{ name: 'commonName', value: name }]);
  cert.setIssuer(ca.cert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', ...(usage === 'server' ? { serverAuth: true } : { clientAuth: true }) },
    ...(altNames.length === 0 ? [] : [{ name: 'subjectAltName', altNames: [...altNames] }]),
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: ca.cert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(ca.key.privateKey, forge.md.sha256.create());
  const certPem = forge.pki.certificateToPem(cert);
  const certFile = path.join(dir, `${name}.pem`);
  const keyFile = path.join(dir, `${name}.key`);
  fs.writeFileSync(certFile, certPem);
  fs.writeFileSync(keyFile, key.pem, { mode: 0o600 });
  return { certPem, keyPem: key.pem, certFile, keyFile, sha256: derSha256(cert), serial: cert.serialNumber };
}

/**
 * A v2 CRL (RFC 5280 §5.1) from `ca` revoking `serials`, as PEM. forge has no CRL support, so the
 * TBSCertList is assembled with forge.asn1 and signed sha256WithRSAEncryption with node:crypto.
 */
function makeCrl(ca: CaMaterial, serials: readonly string[], nextUpdate: Date | null = new Date(Date.now() + 7 * DAY_MS)): string {
  const { asn1 } = forge;
  const T = asn1.Type;
  const C = asn1.Class.UNIVERSAL;
  const algorithm = (): forge.asn1.Asn1 =>
    asn1.create(C, T.SEQUENCE, true, [asn1.create(C, T.OID, false, asn1.oidToDer(forge.pki.oids['sha256WithRSAEncryption'] as string).getBytes()), asn1.create(C, T.NULL, false, '')]);
  const time = (d: Date): forge.asn1.Asn1 => asn1.create(C, T.UTCTIME, false, asn1.dateToUtcTime(d));
  const now = Date.now();
  const revoked = serials.map((s) => asn1.create(C, T.SEQUENCE, true, [asn1.create(C, T.INTEGER, false, forge.util.hexToBytes(s)), time(new Date(now - 3_600_000))]));
  const tbs = asn1.create(C, T.SEQUENCE, true, [
    asn1.create(C, T.INTEGER, false, asn1.integerToDer(1).getBytes()),
    algorithm(),
    forge.pki.distinguishedNameToAsn1(ca.cert.subject),
    time(new Date(now - DAY_MS)),
    ...(nextUpdate === null ? [] : [time(nextUpdate)]),
    ...(revoked.length === 0 ? [] : [asn1.create(C, T.SEQUENCE, true, revoked)]),
  ]);
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), 'binary');
  const signature = sign('sha256', tbsDer, ca.keyPem);
  const crl = asn1.create(C, T.SEQUENCE, true, [tbs, algorithm(), asn1.create(C, T.BITSTRING, false, `\u0000${signature.toString('binary')}`)]);
  const b64 = Buffer.from(asn1.toDer(crl).getBytes(), 'binary').toString('base64');
  return `-----BEGIN X509 CRL-----\n${b64.replace(/.{1,64}/g, '$&\n')}-----END X509 CRL-----\n`;
}

/** Makes the whole PKI in a new temporary directory (a second or so: ten RSA keys). */
export function createClientPki(): ClientPki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-client-pki-'));
  const removeDir = (): void => fs.rmSync(dir, { recursive: true, force: true });
  process.once('exit', removeDir);
  const now = Date.now();
  const valid = (): [Date, Date] => [new Date(now - DAY_MS), new Date(now + 2 * DAY_MS)];
  const cas = new Map<CertificateAuthority, CaMaterial>();
  const newCa = (name: string): CaMaterial => {
    const ca = makeCa(dir, name);
    cas.set(ca, ca);
    return ca;
  };
  const issue = (ca: CertificateAuthority, name: string, options: ClientCertificateOptions = {}): IssuedCertificate => {
    const material = cas.get(ca);
    if (material === undefined) throw new Error(`client-pki: ${ca.name} is not a CA of this PKI`);
    const [notBefore, notAfter] = valid();
    const altNames = (options.uris ?? []).map((value): AltName => ({ type: 6, value }));
    return issueLeaf(dir, material, name, 'client', altNames, options.notBefore ?? notBefore, options.notAfter ?? notAfter);
  };
  const writeCrl = (ca: CertificateAuthority, revoked: readonly IssuedCertificate[], name: string, nextUpdate?: Date | null): string => {
    const material = cas.get(ca);
    if (material === undefined) throw new Error(`client-pki: ${ca.name} is not a CA of this PKI`);
    const file = path.join(dir, `${name}.crl.pem`);
    fs.writeFileSync(file, makeCrl(material, revoked.map((c) => c.serial), nextUpdate));
    return file;
  };
  const serverCa = newCa('server');
  const clientCa = newCa('client');
  const otherCa = newCa('other');
  const server = issueLeaf(dir, serverCa, 'server', 'server', [{ type: 7, ip: '127.0.0.1' }, { type: 2, value: 'localhost' }], ...valid());
  const revoked = issue(clientCa, 'revoked', { uris: ['spiffe://sluice.test/revoked'] });
  const crlFile = writeCrl(clientCa, [revoked], 'client-ca');
  const strayKeyFile = path.join(dir, 'stray.key');
  fs.writeFileSync(strayKeyFile, newKey().pem, { mode: 0o600 });
  return {
    dir,
    serverCa,
    server,
    clientCa,
    agentA: issue(clientCa, 'agent-a', { uris: ['spiffe://sluice.test/agent-a'] }),
    agentB: issue(clientCa, 'agent-b', { uris: ['spiffe://sluice.test/agent-b'] }),
    noSan: issue(clientCa, 'no-san'),
    expired: issue(clientCa, 'expired', { uris: ['spiffe://sluice.test/agent-a'], notBefore: new Date(now - 10 * DAY_MS), notAfter: new Date(now - DAY_MS) }),
    notYetValid: issue(clientCa, 'not-yet-valid', { uris: ['spiffe://sluice.test/agent-a'], notBefore: new Date(now + DAY_MS), notAfter: new Date(now + 10 * DAY_MS) }),
    revoked,
    crlFile,
    otherCa,
    foreign: issue(otherCa, 'foreign', { uris: ['spiffe://sluice.test/agent-a'] }),
    strayKeyFile,
    issue,
    newCa,
    writeCrl,
    cleanup: () => {
      process.removeListener('exit', removeDir);
      removeDir();
    },
  };
}
