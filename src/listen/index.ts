// The listen module's face: binding a server to a TCP address or to a Unix socket whose file has the mode
// Sluice chose (ADR 0014), the socket group, and removing the file on close while it is still ours.
// Shared by proxy/ (the listeners) and admin/ (the admin socket and the metrics listener).
export { bindListener } from './bind-listener.js';
export { closeListeners, type ClosableListener, type CloseHooks } from './close-listeners.js';
export { bindSocket, bindTcp, type BoundSocket, type UnixSocketOptions } from './bind-socket.js';
export { ListenError, inUseMessage } from './listen-error.js';
export { GROUP_SOCKET_FILE_MODE, SOCKET_FILE_MODE, SocketFileError, bindUnixSocket, removeSocketFile, type SocketFile, type UnixSocketProbe } from './socket-file.js';
export { GROUP_FILE, checkSocketGroups, resolveSocketGroup } from './socket-group.js';
export { MAX_PROXY_HEADER_BYTES, parseProxyHeader, type ProxyHeader, type ProxyHeaderResult } from './proxy-protocol.js';
export { proxyProtocolGate, trustedSourceList, type ProxyHeaderOutcome, type ProxyProtocolGate } from './proxy-protocol-reader.js';
export { HandshakeReader, negotiateSocks5, readSocks5Request, socks5Reply } from './socks5-handshake.js';
export { CERTIFICATE_WARNING_MS, CRL_WARNING_MS, ListenerTlsError, acceptTls, expiryWarnings, loadListenerTls, loadListenersTls, presentedCertificate, uriSans, type ListenerTlsFiles, type LoadedTls, type PresentedCertificate, type TlsHandshake, type TlsHolder } from './listener-tls.js';
export { crlNextUpdate, earliestCrlNextUpdate } from './crl-next-update.js';
