// The `host` class: every address of the machine's own interfaces, on every port (security review
// 2026-12, finding 8). A service bound to 0.0.0.0 or [::] answers on all of them, so the host's public
// IPv4 or global IPv6 address is the host, not the internet. Never dials; reads only the interface list.
import os from 'node:os';
import { classifyAddress } from './address-class.js';

/** What os.networkInterfaces() returns: interface name → its addresses. */
export type InterfaceList = Readonly<Record<string, readonly { readonly address: string }[] | undefined>>;
export type ReadInterfaces = () => InterfaceList;

/** How often the interface list is read again: Node has no event for an address change. */
export const HOST_ADDRESS_REFRESH_MS = 1_000;

/**
 * The effective form (classifyAddress) of every interface address that is not loopback: the form a
 * destination is compared in, so ::ffff:a.b.c.d, NAT64 and 6to4 spellings of an interface's IPv4
 * address match it too. Loopback stays `loopback`; unspecified and multicast are never granted anyway.
 */
function collectHostAddresses(list: InterfaceList): ReadonlySet<string> {
  const out = new Set<string>();
  for (const infos of Object.values(list)) {
    for (const info of infos ?? []) {
      const { class: cls, effective } = classifyAddress(info.address);
      if (cls !== 'loopback' && cls !== 'unspecified' && cls !== 'multicast') out.add(effective);
    }
  }
  return out;
}

export class HostAddresses {
  private addresses: ReadonlySet<string>;
  private timer: NodeJS.Timeout | null = null;
  private changes = 0;

  /** Reads the interface list once, now; `start()` keeps it current. */
  constructor(
    private readonly read: ReadInterfaces = os.networkInterfaces,
    readonly refreshMs: number = HOST_ADDRESS_REFRESH_MS,
  ) {
    this.addresses = collectHostAddresses(read());
  }

  /** True when `effective` (an address as classifyAddress returns it) belongs to this machine. No allocation. */
  has(effective: string): boolean {
    return this.addresses.has(effective);
  }

  /** Reads the interface list again. A failed read keeps the last set: an address is never dropped by an error. */
  refresh(): void {
    let list: InterfaceList;
    try {
      list = this.read();
    } catch {
      return;
    }
    const next = collectHostAddresses(list);
    if (next.size === this.addresses.size && [...next].every((a) => this.addresses.has(a))) return;
    this.addresses = next;
    this.changes += 1;
  }

  /** Bumped whenever the set of host addresses changes: a classification made before may not hold. */
  get version(): number {
    return this.changes;
  }

  /** Re-reads every `refreshMs` on an unref'd timer (it never keeps the process alive). Idempotent. */
  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
