// NO_PROXY as curl documents it: comma- or space-separated names matched as the host or any domain
// containing it (a leading dot or `*.` is the same), `*` for everything, optional `:port`, and IP
// addresses or CIDR ranges matched against IP-literal hosts only (never against resolved names).
import net from 'node:net';
import type { CanonicalDestination } from '../core/index.js';

type NoProxyRule =
  | { readonly kind: 'all' }
  | { readonly kind: 'domain'; readonly suffix: string; readonly port: number | null }
  | { readonly kind: 'ip'; readonly list: net.BlockList; readonly port: number | null };

export interface NoProxy {
  readonly rules: readonly NoProxyRule[];
  matches(dest: CanonicalDestination): boolean;
}

function splitPort(entry: string): { host: string; port: number | null } | null {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (v6 !== null) return { host: v6[1] ?? '', port: v6[2] === undefined ? null : Number(v6[2]) };
  if (net.isIPv6(entry.split('/')[0] ?? '')) return { host: entry, port: null };
  const colon = entry.lastIndexOf(':');
  if (colon < 0) return { host: entry, port: null };
  const port = entry.slice(colon + 1);
  if (!/^\d{1,5}$/.test(port)) return null;
  return { host: entry.slice(0, colon), port: Number(port) };
}

export function parseNoProxy(value: string): { ok: true; value: NoProxy } | { ok: false; message: string } {
  const rules: NoProxyRule[] = [];
  for (const raw of value.split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') {
      rules.push({ kind: 'all' });
      continue;
    }
    const split = splitPort(entry);
    if (split === null) return { ok: false, message: `NO_PROXY entry "${raw}" has a bad port` };
    const [address = '', prefixText] = split.host.split('/');
    const family = net.isIP(address);
    if (family !== 0) {
      const max = family === 4 ? 32 : 128;
      const prefix = prefixText === undefined ? max : Number(prefixText);
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) return { ok: false, message: `NO_PROXY entry "${raw}" has a bad prefix` };
      const list = new net.BlockList();
      list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      rules.push({ kind: 'ip', list, port: split.port });
      continue;
    }
    const suffix = split.host.replace(/^\*?\./, '').replace(/\.$/, '');
    if (suffix === '' || !/^[a-z0-9_.-]+$/.test(suffix)) return { ok: false, message: `NO_PROXY entry "${raw}" is not a host, domain, address or CIDR` };
    rules.push({ kind: 'domain', suffix, port: split.port });
  }
  return {
    ok: true,
    value: {
      rules,
      matches(dest) {
        return rules.some((rule) => matchRule(rule, dest));
      },
    },
  };
}

function matchRule(rule: NoProxyRule, dest: CanonicalDestination): boolean {
  if (rule.kind === 'all') return true;
  if (rule.port !== null && rule.port !== dest.port) return false;
  if (rule.kind === 'ip') return dest.hostKind !== 'name' && rule.list.check(dest.host, dest.hostKind === 'ipv4' ? 'ipv4' : 'ipv6');
  return dest.hostKind === 'name' && (dest.host === rule.suffix || dest.host.endsWith(`.${rule.suffix}`));
}
