// Which forwarded requests get a connection of their own (proxy/tunnel/forward-auth.ts), and how a relay result
// becomes the hop's verdict. The handshake itself runs against real proxies in
// test/integration/upstream-ntlm.test.ts and test/integration/upstream-negotiate.test.ts.
import { describe, expect, it } from 'vitest';
import type { ProxyAuthMode, UpstreamProxy } from '../../../../src/core/index.js';
import { LearnedMechanisms, unavailableGss } from '../../../../src/egress/index.js';
import { bindsConnection, settled } from '../../../../src/proxy/tunnel/forward-auth.js';

function proxy(auth: ProxyAuthMode | undefined, authorization: string | null = null): UpstreamProxy {
  return { label: 'http://corp.test:3128', tls: false, host: 'corp.test', port: 3128, authorization, ca: null, inspectsTls: false, sendResolvedAddress: false, ...(auth === undefined ? {} : { auth }) };
}

describe('bindsConnection', () => {
  const context = (learned = new LearnedMechanisms()) => ({ gss: unavailableGss('test'), learned });

  it('none and basic share the pooled agent (Basic travels on every request); negotiate and ntlm never do', () => {
    expect(bindsConnection(proxy(undefined), context())).toBe(false);
    expect(bindsConnection(proxy(undefined, 'Basic eDp5'), context())).toBe(false);
    expect(bindsConnection(proxy('basic', 'Basic eDp5'), context())).toBe(false);
    expect(bindsConnection(proxy('negotiate'), context())).toBe(true);
    expect(bindsConnection(proxy('ntlm'), context())).toBe(true);
  });

  it('auto is connection-bound until it has learned Basic for that proxy, and again if it learns otherwise', () => {
    const learned = new LearnedMechanisms();
    expect(bindsConnection(proxy('auto'), context(learned))).toBe(true);
    learned.set('http://corp.test:3128', 'basic');
    expect(bindsConnection(proxy('auto'), context(learned))).toBe(false);
    learned.set('http://corp.test:3128', 'ntlm');
    expect(bindsConnection(proxy('auto'), context(learned))).toBe(true);
  });
});

describe('settled', () => {
  it('a response is the hop allowed; a failure keeps its reason and detail', () => {
    const responded = { phase: 'responded', status: 200, bytesUp: 0, bytesDown: 3, closedBy: null, headersAt: 1 } as const;
    expect(settled(responded)).toEqual({ ok: true, value: responded });
    expect(settled({ phase: 'failed', reason: 'upstream_auth_required', detail: 'x answered 407', bytesUp: 0 })).toMatchObject({ ok: false, reason: 'upstream_auth_required', detail: 'x answered 407' });
  });

  it('a challenge or a probe answer reaching it is an internal error, never an allowed hop', () => {
    expect(settled({ phase: 'challenged', challenges: ['NTLM'] })).toMatchObject({ ok: false, reason: 'internal_error' });
    expect(settled({ phase: 'probed', status: 200 })).toMatchObject({ ok: false, reason: 'internal_error' });
  });
});
