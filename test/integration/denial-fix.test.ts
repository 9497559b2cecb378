// UX review 2026-12-04 findings 2 and 3 (issue 25): a denied program is told why and how to fix it.
// A real `sluice start` (compiled dist/) refuses a CONNECT whose name resolves to loopback, read on a raw
// socket (no client shows a CONNECT's 403 body), and absolute-form requests through the real curl; the
// body names the refused class and the fix, never the address, the token or a request header value, and
// the decision record says the same class. Then `sluice explain` on that config prints the same fix.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { parseResponseHead, rawRequest } from '../support/raw-client.js';
import { tokenHash } from '../support/sluice.js';
import { BIN, killSluiceProcesses, logLines, startSluiceProcess, type SluiceProcess } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';

const TOKEN = 'tok-denial-fix-9f2c';
const SECRET_HEADER = 'x-secret-denial-fix-77';

describe('a denial names its fix (UX review 2026-12-04 findings 2 and 3)', () => {
  let dir: string;
  let origin: Origin;
  let sluice: SluiceProcess;
  let configFile: string;
  let auditFile: string;
  const proxy = (): string => `http://g-fix:${TOKEN}@127.0.0.1:${sluice.port}`;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-denial-fix-'));
    origin = await startHttpOrigin();
    auditFile = path.join(dir, 'audit.jsonl');
    configFile = path.join(dir, 'sluice.yaml');
    sluice = await startSluiceProcess({
      configFile,
      config: {
        state: path.join(dir, 'state'),
        listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
        dns: { hosts: { 'example.test': ['127.0.0.1'], 'origin.test': ['127.0.0.1'] } },
        audit: { file: auditFile },
        grants: [
          {
            id: 'g-fix',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`https://example.test:${origin.port}`, `http://example.test:${origin.port}`, `https://origin.test:${origin.port}`],
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await killSluiceProcesses();
    await origin?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  const decisions = (): Record<string, unknown>[] => (fs.existsSync(auditFile) ? logLines(fs.readFileSync(auditFile, 'utf8')) : []).filter((r) => r['kind'] === 'decision');

  it('a CONNECT to a name that resolves to loopback: 403 whose body names the class and the fix, never the address', async () => {
    const basic = Buffer.from(`g-fix:${TOKEN}`).toString('base64');
    const target = `example.test:${origin.port}`;
    const answer = await rawRequest(sluice.port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${basic}\r\n${SECRET_HEADER}: v\r\n\r\n`, { untilClose: true });
    const head = parseResponseHead(answer.data);
    expect(head?.status).toBe(403);
    expect(head?.headers['proxy-status']).toBe('sluice; error=destination_ip_prohibited; details="address_class_denied"');
    const body = answer.data.subarray(head?.headLength ?? 0).toString('utf8');
    expect(body).toBe(
      `sluice: 403 address_class_denied: destination resolves only to addresses the grant does not allow (destination ${target}, grant g-fix, denied class loopback); ` +
        'fix: allow it with allowAddressClasses: [loopback] on the grant (sluice run --allow-class loopback), or only its addresses with allowAddresses (--allow-address; sluice explain lists them)\n',
    );
    for (const secret of ['127.0.0.1', TOKEN, basic, SECRET_HEADER]) expect(answer.text).not.toContain(secret);
    expect(origin.connections).toBe(0);
    // The record on the host says the same class, and the address the body leaves out.
    await waitUntil(() => decisions().some((d) => d['reason'] === 'address_class_denied' && d['request'] === 'connect'), { timeoutMs: 5000, label: 'the decision record' });
    const record = decisions().find((d) => d['reason'] === 'address_class_denied' && d['request'] === 'connect');
    expect(record).toMatchObject({ detail: 'resolves to loopback', addresses: [{ address: '127.0.0.1', class: 'loopback', allowed: false }] });
  });

  it('an absolute-form request through curl: the same body, the class and the fix on stdout', async () => {
    const r = await runCurl(['-i', '-x', proxy(), '-H', `${SECRET_HEADER}: v`, `http://example.test:${origin.port}/x`]);
    expect(r.code).toBe(0);
    const res = curlHeadersAndBody(r.stdout);
    expect(res.status).toBe(403);
    expect(res.body).toMatch(/^sluice: 403 address_class_denied: .* \(destination example\.test:\d+, grant g-fix, denied class loopback\); fix: allow it with allowAddressClasses: \[loopback\] on the grant \(sluice run --allow-class loopback\)/);
    for (const secret of ['127.0.0.1', TOKEN, SECRET_HEADER]) expect(r.stdout).not.toContain(secret);
  });

  it('a destination no rule grants: the fix names the rule to add, and the body lists none of the grant’s rules', async () => {
    const r = await runCurl(['-i', '-x', proxy(), 'http://deny.test:22080/']);
    const res = curlHeadersAndBody(r.stdout);
    expect(res.status).toBe(403);
    expect(res.body).toBe(
      'sluice: 403 destination_not_granted: destination is not in the principal’s grant (destination deny.test:22080, grant g-fix); ' +
        'fix: add a destination rule for http://deny.test:22080 to the grant (sluice run --destination http://deny.test:22080)\n',
    );
    expect(res.body).not.toContain('example.test');
    expect(res.body).not.toContain('origin.test');
  });

  it('a 407 without a principal gets the generic token fix, no grant-specific hint', async () => {
    const r = await runCurl(['-i', '-x', `http://127.0.0.1:${sluice.port}`, 'http://deny.test:22080/']);
    const res = curlHeadersAndBody(r.stdout);
    expect(res.status).toBe(407);
    expect(res.body).toMatch(/^sluice: 407 token_missing: .* \(destination unknown, grant none\); fix: send the grant id and token as proxy credentials/);
    expect(res.body).not.toContain('g-fix');
  });

  it('sluice explain on the same config prints the same fix, and for a miss the grant’s rules and the closest one', () => {
    const explain = (target: string, json = false): { status: number | null; stdout: string } => {
      const r = spawnSync(process.execPath, [BIN, 'explain', ...(json ? ['--json'] : []), '--config', configFile, '--grant', 'g-fix', target], { encoding: 'utf8', timeout: 15_000 });
      return { status: r.status, stdout: r.stdout };
    };
    const denied = explain(`https://example.test:${origin.port}`);
    expect(denied.status).toBe(1);
    expect(denied.stdout).toContain('\nfix:        allow it with allowAddressClasses: [loopback] on the grant (sluice run --allow-class loopback), or only its addresses with allowAddresses (--allow-address; sluice explain lists them)\n');
    const miss = explain('https://origin.test:8443');
    expect(miss.status).toBe(1);
    expect(miss.stdout).toContain(`\nrules:      https://example.test:${origin.port}, http://example.test:${origin.port}, https://origin.test:${origin.port}\n`);
    expect(miss.stdout).toContain(`\nclosest:    https://origin.test:${origin.port} (same host, port ${origin.port} instead of 8443)\n`);
    expect(miss.stdout).toContain('\nfix:        add a destination rule for https://origin.test:8443 to the grant (sluice run --destination https://origin.test:8443)\n');
    const json = JSON.parse(explain('https://origin.test:8443', true).stdout) as { fix: string; rules: string[]; closest: { rule: string } };
    expect(json.fix).toBe('add a destination rule for https://origin.test:8443 to the grant (sluice run --destination https://origin.test:8443)');
    expect(json.rules).toHaveLength(3);
    expect(json.closest.rule).toBe(`https://origin.test:${origin.port}`);
    // A rule that matches still meets the address class check: its fix is the class, and no rules are listed.
    const loopback = JSON.parse(explain(`https://origin.test:${origin.port}`, true).stdout) as { reason: string; fix: unknown; rules: unknown };
    expect(loopback).toMatchObject({ reason: 'address_class_denied', fix: expect.stringContaining('allowAddressClasses: [loopback]'), rules: null });
  });
});
