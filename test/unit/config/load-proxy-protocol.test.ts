// listeners[].proxyProtocol in the config: trustedSources must be CIDRs (a typo must not widen trust),
// at least one, and a Unix listener with it is refused naming the key (it has no peer address to trust).
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../../src/config/index.js';

function load(listener: Record<string, unknown>): ReturnType<typeof parseConfigText> {
  return parseConfigText(stringify({ listeners: [{ name: 'lb', listen: '127.0.0.1:0', ...listener }] }), path.join(os.tmpdir(), 's.yaml'), os.tmpdir());
}

describe('listeners[].proxyProtocol', () => {
  it('accepts IPv4 and IPv6 CIDRs and single addresses, and is absent by default', () => {
    const ok = load({ proxyProtocol: { trustedSources: ['10.0.0.0/8', '192.0.2.7', 'fd00::/8', '::1/128', '0.0.0.0/0'] } });
    expect(ok.ok && ok.config.listeners[0]?.proxyProtocol?.trustedSources).toHaveLength(5);
    const none = load({});
    expect(none.ok && none.config.listeners[0]?.proxyProtocol).toBeUndefined();
  });

  it.each([['10.0.0.0/33'], ['fd00::/129'], ['10.0.0.0/08'], ['10.0.0/8'], ['lb.internal'], ['10.0.0.0/8/1'], [''], ['10.0.0.0/']])('refuses the trusted source %j', (cidr) => {
    const result = load({ proxyProtocol: { trustedSources: [cidr] } });
    expect(result.ok).toBe(false);
    expect(!result.ok && result.issues[0]?.path).toBe('listeners[0].proxyProtocol.trustedSources[0]');
  });

  it('refuses an empty list, an unknown key, and a Unix listener (naming the key)', () => {
    const empty = load({ proxyProtocol: { trustedSources: [] } });
    expect(!empty.ok && empty.issues[0]?.path).toBe('listeners[0].proxyProtocol.trustedSources');
    const unknown = load({ proxyProtocol: { trustedSources: ['10.0.0.0/8'], version: 2 } });
    expect(!unknown.ok && unknown.issues[0]?.path).toBe('listeners[0].proxyProtocol.version');
    const unix = load({ listen: 'unix:/tmp/lb.sock', proxyProtocol: { trustedSources: ['10.0.0.0/8'] } });
    expect(unix.ok).toBe(false);
    expect(!unix.ok && unix.issues).toEqual([
      { path: 'listeners[0].proxyProtocol', message: 'a unix:/path listener has no peer address to trust: PROXY protocol needs a TCP listener' },
    ]);
  });
});
