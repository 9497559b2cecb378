// listen()'s refusals worded for an operator (UX review 2026-12-04 finding 12; issue 25): a port in
// use asks whether another Sluice runs, a port below 1024 names the capability it needs (ip(7)), an
// address on no interface says so; each keeps the address as the caller gave it and the errno code.
// Anything else comes back as it was. The kernel's errors are made here (EACCES needs a non-root user, EADDRNOTAVAIL an
// address off loopback); bind-socket.test.ts binds a real held port.
import { describe, expect, it } from 'vitest';
import { ListenError, inUseMessage, tcpListenError } from '../../../src/listen/listen-error.js';

const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`listen ${code}: from the kernel`), { code, syscall: 'listen' });

describe('tcpListenError', () => {
  it.each([
    ['EADDRINUSE', '127.0.0.1:3180', 3180, '127.0.0.1:3180 is in use (is another sluice running?)'],
    ['EADDRINUSE', '[::1]:3180', 3180, '[::1]:3180 is in use (is another sluice running?)'],
    ['EACCES', '127.0.0.1:80', 80, '127.0.0.1:80: permission denied: a port below 1024 needs root or CAP_NET_BIND_SERVICE; choose a port from 1024 up'],
    ['EACCES', '127.0.0.1:1023', 1023, '127.0.0.1:1023: permission denied: a port below 1024 needs root or CAP_NET_BIND_SERVICE; choose a port from 1024 up'],
    ['EACCES', '127.0.0.1:1024', 1024, '127.0.0.1:1024: permission denied'],
    ['EADDRNOTAVAIL', '127.0.0.1:3180', 3180, '127.0.0.1:3180: no interface of this host has that address'],
  ])('%s on %s: %s', (code, listen, port, message) => {
    const cause = errno(code);
    const error = tcpListenError(listen, port, cause);
    expect(error).toBeInstanceOf(ListenError);
    expect(error).toMatchObject({ listen, code, message, cause });
  });

  it('passes any other error through as it came', () => {
    const other = errno('EMFILE');
    expect(tcpListenError('127.0.0.1:3180', 3180, other)).toBe(other);
  });

  it('words a Unix socket in use as a port in use', () => {
    expect(inUseMessage('unix:/run/sluice/proxy.sock')).toBe('unix:/run/sluice/proxy.sock is in use (is another sluice running?)');
  });
});
