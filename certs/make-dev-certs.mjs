#!/usr/bin/env node
// Makes a throwaway development PKI: a CA, a server certificate and a client certificate, as PEM files.
// Usage: node certs/make-dev-certs.mjs [--out DIR] [--days N] [--force] [SAN[,SAN...] ...]
// Development only. Never commit the output and never trust the CA outside a local setup.
import { X509Certificate, generateKeyPairSync } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import forge from 'node-forge';

const DEFAULT_SANS = ['localhost', '127.0.0.1', '::1'];
const DEFAULT_DAYS = 90;
const DAY_MS = 24 * 60 * 60 * 1000;

const USAGE = `Usage: node certs/make-dev-certs.mjs [options] [SAN[,SAN...] ...]

Writes a development CA, a server certificate and a client certificate as PEM files.

  SAN            DNS names and/or IP literals for the server certificate
                 (default: ${DEFAULT_SANS.join(',')})
  --out DIR      output directory (default: certs/dev next to this script)
  --days N       validity of the leaf certificates in days (default: ${DEFAULT_DAYS}; the CA gets N+1)
  --client-cn CN common name of the client certificate (default: sluice-dev-client)
  --force        overwrite existing files in the output directory
  -h, --help     show this help
`;

function fail(message) {
  process.stderr.write(`make-dev-certs: ${message}\n`);
  process.exit(1);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      days: { type: 'string' },
      'client-cn': { type: 'string' },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
} catch (err) {
  fail(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
}
const { values, positionals } = parsed;
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const sans = positionals.flatMap((arg) => arg.split(',')).map((s) => s.trim()).filter((s) => s.length > 0);
const names = sans.length > 0 ? [...new Set(sans)] : DEFAULT_SANS;
for (const name of names) {
  if (isIP(name) === 0 && !/^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(name)) {
    fail(`not a DNS name or IP address: ${JSON.stringify(name)}`);
  }
}
const days = values.days === undefined ? DEFAULT_DAYS : Number(values.days);
if (!Number.isInteger(days) || days < 1 || days > 825) fail('--days must be an integer from 1 to 825');
const clientCn = values['client-cn'] ?? 'sluice-dev-client';

const outDir = values.out === undefined ? fileURLToPath(new URL('./dev/', import.meta.url)) : resolve(values.out);
const files = {
  caCert: join(outDir, 'ca.pem'),
  caKey: join(outDir, 'ca-key.pem'),
  serverCert: join(outDir, 'server.pem'),
  serverKey: join(outDir, 'server-key.pem'),
  serverChain: join(outDir, 'server-chain.pem'),
  clientCert: join(outDir, 'client.pem'),
  clientKey: join(outDir, 'client-key.pem'),
};
// Paths under the working directory print relative; anything else prints absolute.
function show(file) {
  const rel = relative(process.cwd(), file);
  return rel === '' ? '.' : rel.startsWith('..') || isAbsolute(rel) ? file : rel;
}
const existing = Object.values(files).filter((file) => existsSync(file));
if (existing.length > 0 && !values.force) {
  fail(`refusing to overwrite ${existing.map(show).join(', ')} (pass --force)`);
}

// Node's RSA keygen is fast; forge builds and signs the certificates.
function newKey() {
  const { privateKey: keyPem } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const privateKey = forge.pki.privateKeyFromPem(keyPem);
  const publicKey = forge.pki.rsa.setPublicKey(privateKey.n, privateKey.e);
  return { keyPem, privateKey, publicKey };
}

function newCert(publicKey, validDays) {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // 16 random bytes with a leading 0x01 keep the DER integer positive and unique.
  cert.serialNumber = '01' + forge.util.bytesToHex(forge.random.getBytesSync(15));
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 60 * 60 * 1000);
  cert.validity.notAfter = new Date(now + validDays * DAY_MS);
  return cert;
}

const altName = (name) => (isIP(name) !== 0 ? { type: 7, ip: name } : { type: 2, value: name });

// CA
const caKey = newKey();
const caCert = newCert(caKey.publicKey, days + 1);
const caSubject = [
  { name: 'commonName', value: `Sluice Development CA (${hostname()} ${new Date().toISOString().slice(0, 10)})` },
  { name: 'organizationName', value: 'Sluice development (not trusted)' },
];
caCert.setSubject(caSubject);
caCert.setIssuer(caSubject);
caCert.setExtensions([
  { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
  { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
  { name: 'subjectKeyIdentifier' },
]);
caCert.sign(caKey.privateKey, forge.md.sha256.create());
const caKeyId = caCert.generateSubjectKeyIdentifier().getBytes();

function leaf(commonName, extKeyUsage, altNames) {
  const key = newKey();
  const cert = newCert(key.publicKey, days);
  cert.setSubject([{ name: 'commonName', value: commonName }]);
  cert.setIssuer(caCert.subject.attributes);
  const extensions = [
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', ...extKeyUsage },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caKeyId },
  ];
  if (altNames !== undefined) extensions.push({ name: 'subjectAltName', altNames });
  cert.setExtensions(extensions);
  cert.sign(caKey.privateKey, forge.md.sha256.create());
  return { keyPem: key.keyPem, certPem: forge.pki.certificateToPem(cert) };
}

const caPem = forge.pki.certificateToPem(caCert);
const server = leaf(names[0] ?? 'localhost', { serverAuth: true }, names.map(altName));
const client = leaf(clientCn, { clientAuth: true }, undefined);

// Self-check with Node's own X.509 parser before writing anything.
const caX509 = new X509Certificate(caPem);
for (const pem of [server.certPem, client.certPem]) {
  if (!new X509Certificate(pem).checkIssued(caX509)) fail('internal error: a leaf does not chain to the CA');
}

mkdirSync(outDir, { recursive: true });
function write(file, text, secret) {
  writeFileSync(file, text, { mode: secret ? 0o600 : 0o644 });
  // mode only applies when the file is created; enforce it when --force overwrote an old file.
  chmodSync(file, secret ? 0o600 : 0o644);
}
write(files.caCert, caPem, false);
write(files.caKey, caKey.keyPem, true);
write(files.serverCert, server.certPem, false);
write(files.serverKey, server.keyPem, true);
write(files.serverChain, server.certPem + caPem, false);
write(files.clientCert, client.certPem, false);
write(files.clientKey, client.keyPem, true);

const notAfter = new X509Certificate(server.certPem).validTo;
process.stdout.write(
  [
    `Wrote a development PKI to ${show(outDir)} (leaves valid until ${notAfter}):`,
    `  ${show(files.caCert)}  CA certificate: trust anchor (route.proxy.caFile, curl --cacert / --proxy-cacert)`,
    `  ${show(files.caKey)}  CA private key (0600)`,
    `  ${show(files.serverCert)}  server certificate, SANs: ${names.join(', ')}`,
    `  ${show(files.serverKey)}  server private key (0600)`,
    `  ${show(files.serverChain)}  server certificate followed by the CA`,
    `  ${show(files.clientCert)}  client certificate, CN=${clientCn} (extKeyUsage clientAuth)`,
    `  ${show(files.clientKey)}  client private key (0600)`,
    `CA SHA-256 fingerprint: ${caX509.fingerprint256}`,
    'Development only: never commit these files and never trust this CA system-wide.',
    '',
  ].join('\n'),
);
