import { it } from 'vitest';
import { PacScript } from '../../../src/route/pac-evaluator.js';
it('big pac', async () => {
  const port = { lookupSync: () => null, myIpAddress: () => '127.0.0.1', now: () => new Date() };
  const out: string[] = [];
  for (const kib of [64, 512, 2000]) {
    const lines: string[] = [];
    let size = 0;
    for (let i = 0; size < kib * 1024 - 200; i++) { const l = `  if (shExpMatch(host, "*.domain${i}.example.com")) return "PROXY p${i % 7}.corp:3128";\n`; lines.push(l); size += l.length; }
    const src = `function FindProxyForURL(url, host) {\n${lines.join('')}  return "DIRECT";\n}`;
    const t = performance.now();
    const c = await PacScript.compile(src, port, { timeoutMs: 5000, memoryBytes: 64 << 20, stackBytes: 512 << 10 });
    const ms = performance.now() - t;
    let callMs = -1;
    if (c.ok) { const t2 = performance.now(); await c.value.findProxy('https://x.domain999.example.com/', 'x.domain999.example.com'); callMs = performance.now() - t2; c.value.dispose(); }
    out.push(`${kib}KiB ${src.length} chars ok=${c.ok} ${c.ok ? '' : c.detail} compile=${ms.toFixed(0)}ms call=${callMs.toFixed(1)}ms`);
  }
  throw new Error(out.join(' | '));
}, 120000);
