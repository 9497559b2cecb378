// The `self` class: Sluice's own listeners, admin and metrics ports, reached by any spelling of their
// address. A listener on a loopback or wildcard address makes every loopback and local interface
// address on that port `self`, since any of them may reach it (proxy loops, SSRF to the control plane).
import os from 'node:os';
import net from 'node:net';
import type { AddressClass } from '../core/index.js';

export class SelfAddresses {
  private readonly exact = new Set<string>();
  private readonly anyLocalPorts = new Set<number>();
  private readonly localAddresses = new Set<string>();

  constructor(listeners: readonly string[]) {
    for (const iface of Object.values(os.networkInterfaces())) {
      for (const info of iface ?? []) this.localAddresses.add(info.address.toLowerCase());
    }
    for (const listen of listeners) this.add(listen);
  }

  /** Adds a `host:port` or `[v6]:port` listener address; unix: sockets are not reachable by TCP. */
  add(listen: string): void {
    if (listen.startsWith('unix:')) return;
    const colon = listen.lastIndexOf(':');
    const host = listen.slice(0, colon).replace(/^\[|\]$/g, '').toLowerCase();
    const port = Number(listen.slice(colon + 1));
    if (!Number.isInteger(port) || port <= 0) return;
    if (host === '0.0.0.0' || host === '::' || host === 'localhost' || !net.isIP(host) || this.localAddresses.has(host)) {
      this.anyLocalPorts.add(port);
    } else {
      this.exact.add(`${host} ${port}`);
    }
    if (host.startsWith('127.') || host === '::1') this.anyLocalPorts.add(port);
  }

  has(effective: string, cls: AddressClass, port: number): boolean {
    if (this.exact.has(`${effective} ${port}`)) return true;
    if (!this.anyLocalPorts.has(port)) return false;
    return cls === 'loopback' || cls === 'unspecified' || this.localAddresses.has(effective);
  }
}
