// TLS on a TCP listener (issue 28): the secure context built from listeners[].tls, loaded at start and
// again at every reload, so a certificate, key, client CA or CRL rotates without a restart and without
// ending a live tunnel (each handshake takes the context in force when it starts). A file set that does
// not load changes nothing: the error names the key. Then the handshake itself, on an accepted socket
// (after any PROXY protocol header, as haproxy's send-proxy-v2 puts it before the ClientHello).
import crypto, { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import type net from 'node:net';
import tls from 'node:tls';
import { earliestCrlNextUpdate } from './crl-next-update.js';

export interface ListenerTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly clientCaFile?: string | undefined;
  readonly crlFile?: string | undefined;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
}

/** A loaded file set: the context for new handshakes, and when its own certificate stops being valid. */
export interface LoadedTls {
  readonly context: tls.SecureContext;
  readonly requestCert: boolean;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
  /** The listener certificate's notAfter, in ms since the epoch. */
  readonly notAfterMs: number;
  /** When the first CRL of crlFile stops being current (its nextUpdate), or null (none, or not readable). */
  readonly crlNextUpdateMs: number | null;
  readonly subject: string;
}

export class ListenerTlsError extends Error {
  constructor(
    /** The key under listeners[i].tls that names the file (certFile, keyFile, clientCaFile, crlFile). */
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

function read(key: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    throw new ListenerTlsError(key, `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/**
 * Reads and checks a file set. Renegotiation is off (SSL_OP_NO_RENEGOTIATION: a client-initiated
 * renegotiation is refused, CVE-2009-3555 and CVE-2011-1473), and with a client CA a certificate is
 * required and verified against it (and the CRL) during the handshake itself: a client without one, or
 * with one from another CA, never gets to send a byte of HTTP.
 */
export function loadListenerTls(files: ListenerTlsFiles): LoadedTls {
  const cert = read('certFile', files.certFile);
  const key = read('keyFile', files.keyFile);
  const ca = files.clientCaFile === undefined ? undefined : read('clientCaFile', files.clientCaFile);
  const crl = files.crlFile === undefined ? undefined : read('crlFile', files.crlFile);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (error) {
    throw new ListenerTlsError('certFile', `${files.certFile} holds no PEM certificate (${(error as Error).message})`);
  }
  try {
    const privateKey = crypto.createPrivateKey(key);
    if (!leaf.checkPrivateKey(privateKey)) throw new ListenerTlsError('keyFile', `${files.keyFile} is not the key of the certificate in ${files.certFile}`);
  } catch (error) {
    if (error instanceof ListenerTlsError) throw error;
    throw new ListenerTlsError('keyFile', `${files.keyFile} holds no usable private key (${(error as Error).message})`);
  }
  if (ca !== undefined) {
    try {
      new X509Certificate(ca);
    } catch (error) {
      throw new ListenerTlsError('clientCaFile', `${files.clientCaFile ?? ''} holds no PEM certificate (${(error as Error).message})`);
    }
  }
  let context: tls.SecureContext;
  try {
    context = tls.createSecureContext({
      cert,
      key,
      ...(ca === undefined ? {} : { ca }),
      // Node reads one CRL per entry and checks every CA of the chain (CRL_CHECK_ALL): each PEM block is its own entry.
      ...(crl === undefined ? {} : { crl: crl.toString('latin1').match(/-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g) ?? crl }),
      minVersion: files.minVersion,
      secureOptions: crypto.constants.SSL_OP_NO_RENEGOTIATION,
      // OpenSSL refuses to resume a session on a context that verifies clients unless it has a session id
      // context (SSL_R_SESSION_ID_CONTEXT_UNINITIALIZED): undici, curl and Node's agents offer their saved
      // session on every new connection. One per file set: a reload (a new CA or CRL) resumes nothing
      // from before, and a resumed session keeps the certificate and chain check of its full handshake.
      sessionIdContext: crypto.createHash('sha256').update(cert).update(ca ?? '').update(crl ?? '').digest('hex').slice(0, 32),
    });
  } catch (error) {
    const message = (error as Error).message;
    const keyName = crl !== undefined && /crl/i.test(message) ? 'crlFile' : /key/i.test(message) ? 'keyFile' : 'certFile';
    throw new ListenerTlsError(keyName, `cannot use the TLS files: ${message}`);
  }
  return {
    context,
    requestCert: ca !== undefined,
    minVersion: files.minVersion,
    notAfterMs: Date.parse(leaf.validTo),
    crlNextUpdateMs: crl === undefined ? null : earliestCrlNextUpdate(crl.toString('latin1')),
    subject: leaf.subject.replaceAll('\n', ', '),
  };
}

/** The context a listener's new handshakes use; a reload replaces `current` in place. */
export interface TlsHolder {
  current: LoadedTls;
}

/** How a handshake ended: the TLS socket to serve, or why it failed (an OpenSSL code, never a secret). */
export type TlsHandshake = { readonly ok: true; readonly socket: tls.TLSSocket } | { readonly ok: false; readonly reason: string };

/**
 * Runs the server side of a handshake on an accepted socket, within `timeoutMs` from now. The socket
 * must be paused, with anything it read already unshifted: Node feeds what the socket buffered to the
 * TLS layer when it wraps it (and the socket must not be resumed after that: its handle is the TLS
 * layer's now).
 */
export function acceptTls(socket: net.Socket, holder: TlsHolder, timeoutMs: number, done: (outcome: TlsHandshake) => void): void {
  const loaded = holder.current;
  const secure = new tls.TLSSocket(socket, {
    isServer: true,
    secureContext: loaded.context,
    requestCert: loaded.requestCert,
    rejectUnauthorized: loaded.requestCert,
    ALPNProtocols: ['http/1.1'],
  });
  let settled = false;
  const finish = (outcome: TlsHandshake): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    secure.removeListener('secure', onSecure);
    secure.removeListener('error', onError);
    secure.removeListener('close', onClose);
    done(outcome);
  };
  const onSecure = (): void => {
    // A TLSSocket built outside tls.Server completes the handshake whatever the chain check said (OpenSSL
    // fails it only for a missing certificate), and only tls.Server's own 'secure' handler reads the
    // verdict: it is read here the same way, and anything but a verified chain (another CA, expired, not
    // yet valid, revoked by the CRL) ends the connection before a byte of HTTP is read. A Node without
    // that call verifies nothing here, so it is refused outright (fail closed; tests cover both Nodes).
    if (loaded.requestCert) {
      const handle = (secure as unknown as { _handle?: { verifyError?: () => Error | null | undefined } })._handle;
      const verdict = typeof handle?.verifyError === 'function' ? handle.verifyError() : new Error('this Node cannot report the client certificate check');
      if (verdict !== null && verdict !== undefined) {
        secure.destroy();
        finish({ ok: false, reason: (verdict as NodeJS.ErrnoException).code ?? verdict.message });
        return;
      }
    }
    finish({ ok: true, socket: secure });
  };
  const onError = (error: NodeJS.ErrnoException): void => {
    secure.destroy();
    finish({ ok: false, reason: error.code ?? error.message });
  };
  const onClose = (): void => finish({ ok: false, reason: 'closed during the handshake' });
  const timer = setTimeout(() => {
    secure.destroy();
    finish({ ok: false, reason: 'no TLS handshake within timeouts.headersMs' });
  }, timeoutMs);
  timer.unref();
  secure.once('secure', onSecure);
  secure.on('error', onError);
  secure.once('close', onClose);
}

/** A client certificate as Sluice maps it to a grant: its SHA-256 (DER, lower-case hex) and its URI SANs. */
export interface PresentedCertificate {
  readonly sha256: string;
  readonly uris: readonly string[];
}

/** The verified peer certificate of a TLS socket, or null when the client sent none. */
export function presentedCertificate(socket: tls.TLSSocket): PresentedCertificate | null {
  const x509 = socket.getPeerX509Certificate();
  if (x509 === undefined) return null;
  return { sha256: x509.fingerprint256.replaceAll(':', '').toLowerCase(), uris: uriSans(x509.subjectAltName) };
}

/**
 * The URI entries of a subjectAltName string. Node quotes an entry holding a comma or a quote as a JSON
 * string (CVE-2021-44532: before that, a crafted SAN could smuggle a second entry), so the list is split
 * outside quotes only and each quoted value is JSON-decoded.
 */
export function uriSans(subjectAltName: string | undefined): string[] {
  if (subjectAltName === undefined || subjectAltName === '') return [];
  const uris: string[] = [];
  let i = 0;
  while (i < subjectAltName.length) {
    const colon = subjectAltName.indexOf(':', i);
    if (colon < 0) break;
    const type = subjectAltName.slice(i, colon);
    let value: string;
    let next: number;
    if (subjectAltName[colon + 1] === '"') {
      let end = colon + 2;
      while (end < subjectAltName.length && subjectAltName[end] !== '"') end += subjectAltName[end] === '\\' ? 2 : 1;
      try {
        value = JSON.parse(subjectAltName.slice(colon + 1, end + 1)) as string;
      } catch {
        return uris;
      }
      next = subjectAltName.indexOf(', ', end + 1);
    } else {
      next = subjectAltName.indexOf(', ', colon + 1);
      value = subjectAltName.slice(colon + 1, next < 0 ? undefined : next);
    }
    if (type === 'URI') uris.push(value);
    if (next < 0) break;
    i = next + 2;
  }
  return uris;
}

/** How far ahead an expiring listener certificate is logged at warn (at start, reload and every 6 hours). */
export const CERTIFICATE_WARNING_MS = 14 * 86_400_000;

/**
 * Loads every TLS listener's files, or says which key of which listener does not load: start refuses to
 * run (exit 2), check-config reports it, a reload changes nothing.
 */
export function loadListenersTls(listeners: readonly { readonly name: string; readonly tls?: ListenerTlsFiles | undefined }[]): { ok: true; value: Map<string, LoadedTls> } | { ok: false; issues: { path: string; message: string }[] } {
  const loaded = new Map<string, LoadedTls>();
  const issues: { path: string; message: string }[] = [];
  listeners.forEach((listener, i) => {
    if (listener.tls === undefined) return;
    try {
      loaded.set(listener.name, loadListenerTls(listener.tls));
    } catch (error) {
      if (!(error instanceof ListenerTlsError)) throw error;
      issues.push({ path: `listeners[${i}].tls.${error.key}`, message: error.message });
    }
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, value: loaded };
}

/** How far ahead a CRL's nextUpdate is logged at warn: CRLs are reissued daily or weekly. */
export const CRL_WARNING_MS = 86_400_000;

/**
 * The warnings for a listener: its certificate expires within CERTIFICATE_WARNING_MS (or has), its CRL
 * stops being current within CRL_WARNING_MS (or has: then every handshake fails, CRL_HAS_EXPIRED).
 */
export function expiryWarnings(listener: string, loaded: LoadedTls, nowMs: number): string[] {
  const warnings: string[] = [];
  const certificate = certificateWarning(listener, loaded, nowMs);
  if (certificate !== null) warnings.push(certificate);
  const crlLeft = loaded.crlNextUpdateMs === null ? Infinity : loaded.crlNextUpdateMs - nowMs;
  if (crlLeft <= 0) warnings.push(`listener ${listener}: a CRL of listeners[].tls.crlFile is past its nextUpdate (${new Date(loaded.crlNextUpdateMs ?? 0).toISOString()}): every client certificate handshake fails (CRL_HAS_EXPIRED) until a current CRL is in the file and Sluice reloads`);
  else if (crlLeft <= CRL_WARNING_MS) warnings.push(`listener ${listener}: a CRL of listeners[].tls.crlFile stops being current on ${new Date(loaded.crlNextUpdateMs ?? 0).toISOString()}, in ${Math.ceil(crlLeft / 3_600_000)} hour(s); after that every client certificate handshake fails: put the next CRL in the file and reload (SIGHUP or POST /v1/reload)`);
  return warnings;
}

function certificateWarning(listener: string, loaded: LoadedTls, nowMs: number): string | null {
  const left = loaded.notAfterMs - nowMs;
  if (left > CERTIFICATE_WARNING_MS) return null;
  if (left <= 0) return `listener ${listener}: its TLS certificate (${loaded.subject}) expired on ${new Date(loaded.notAfterMs).toISOString()}: clients refuse the handshake; replace listeners[].tls.certFile and reload`;
  return `listener ${listener}: its TLS certificate (${loaded.subject}) expires on ${new Date(loaded.notAfterMs).toISOString()}, in ${Math.ceil(left / 86_400_000)} day(s): replace listeners[].tls.certFile and reload (SIGHUP or POST /v1/reload)`;
}
