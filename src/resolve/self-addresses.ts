// The `self` class: Sluice's own listeners, admin and metrics ports, reached by any spelling of their
// address. A listener on a loopback, wildcard or interface address (or a name such as `localhost`) makes
// every loopback, unspecified and host address on that port `self`, since any of them may reach it
// (proxy loops, SSRF to the control plane). Every other address of the host is `host` on every port.
import net from 'node:net';
import type { AddressClass } from '../core/index.js';
import { classifyAddress } from './address-class.js';
import { HostAddresses } from './host-addresses.js';

export class SelfAddresses {
  /** Port → listener addresses bound exactly there (not local, so only that address reaches them). */
  private readonly exact = new Map<number, Set<string>>();
  private readonly anyLocalPorts = new Set<number>();
  private added = 0;

  /** `host` defaults to the interface list read once, without a refresh timer (app.ts starts one). */
  constructor(
    listeners: readonly string[],
    readonly host: HostAddresses = new HostAddresses(),
  ) {
    for (const listen of listeners) this.add(listen);
  }

  /** Adds a `host:port` or `[v6]:port` listener address; unix: sockets are not reachable by TCP. */
  add(listen: string): void {
    if (listen.startsWith('unix:')) return;
    this.added += 1;
    const colon = listen.lastIndexOf(':');
    const host = listen.slice(0, colon).replace(/^\[|\]$/g, '');
    const port = Number(listen.slice(colon + 1));
    if (!Number.isInteger(port) || port <= 0) return;
    if (net.isIP(host) === 0) {
      // A name (`localhost`) binds whatever it resolves to: treat it as every local address.
      this.anyLocalPorts.add(port);
      return;
    }
    // The listener's address in the form has() is asked in: lower case, IPv6 compressed, IPv4 unwrapped.
    const { class: cls, effective } = classifyAddress(host);
    if (cls === 'loopback' || cls === 'unspecified' || this.host.has(effective)) this.anyLocalPorts.add(port);
    else {
      const addresses = this.exact.get(port) ?? new Set<string>();
      addresses.add(effective);
      this.exact.set(port, addresses);
    }
  }

  /** Changes whenever an address's class may have changed: a listener added, or the host's addresses. */
  get version(): number {
    return this.added + this.host.version;
  }

  /** True when `effective:port` (as classifyAddress returns it, with its class) may reach Sluice itself. */
  has(effective: string, cls: AddressClass, port: number): boolean {
    if (this.exact.get(port)?.has(effective) === true) return true;
    if (!this.anyLocalPorts.has(port)) return false;
    return cls === 'loopback' || cls === 'unspecified' || this.host.has(effective);
  }

  /** The class policy sees: `self` beats everything, then `host` (an interface address), then the range class. */
  classOf(effective: string, cls: AddressClass, port: number): AddressClass {
    if (this.has(effective, cls, port)) return 'self';
    return this.host.has(effective) ? 'host' : cls;
  }
}
