// An in-memory ProxyControl for admin tests, plus a log capture and a raw HTTP client; never a real proxy.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AskPending, ControlResult, GrantView, ProxyControl, ReloadOutcome } from '../../../src/core/index.js';

type MutableGrant = { -readonly [K in keyof GrantView]: GrantView[K] };

export class FakeControl implements ProxyControl {
  readonly grants = new Map<string, MutableGrant>();
  readonly issuedTokens: string[] = [];
  readonly specs: unknown[] = [];
  failNextList = false;
  ready = true;
  reloadResult: ControlResult<ReloadOutcome> = { ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } };
  private next = 1;

  issueGrant(spec: unknown): Promise<ControlResult<{ readonly id: string; readonly token: string; readonly grant: GrantView }>> {
    this.specs.push(spec);
    const s = spec as { destinations: string[]; generation?: string; listen?: string; unrestricted: boolean; limits: Record<string, number | string> };
    if (s.listen === 'unix:/taken.sock') {
      return Promise.resolve({ ok: false, status: 409, reason: 'listen_in_use', issues: [{ path: 'listen', message: 'address already in use' }] });
    }
    const id = `g-${this.next++}`;
    const token = randomBytes(24).toString('base64url');
    this.issuedTokens.push(token);
    const grant: MutableGrant = {
      id,
      source: 'runtime',
      generation: s.generation ?? null,
      destinations: s.destinations,
      unrestricted: s.unrestricted,
      allowAddressClasses: [],
      allowAddresses: [],
      requireAttestedAddress: false,
      ask: null,
      answers: [],
      clientCertificate: null,
      limits: s.limits,
      issuedAt: '2026-01-01T00:00:00.000Z',
      expiresAt: typeof s.limits['expiresAt'] === 'string' ? s.limits['expiresAt'] : null,
      revokedAt: null,
      listen: s.listen ?? null,
      usage: { activeConnections: 0, connections: 0, bytes: 0 },
    };
    this.grants.set(id, grant);
    return Promise.resolve({ ok: true, value: { id, token, grant: { ...grant } } });
  }

  listGrants(): readonly GrantView[] {
    if (this.failNextList) {
      this.failNextList = false;
      throw new Error('ledger exploded');
    }
    return [...this.grants.values()].map((g) => ({ ...g }));
  }

  getGrant(id: string): GrantView | undefined {
    const grant = this.grants.get(id);
    return grant === undefined ? undefined : { ...grant };
  }

  revokeGrant(id: string): Promise<ControlResult<{ readonly grant: GrantView; readonly endedConnections: number }>> {
    const grant = this.grants.get(id);
    if (grant === undefined) return Promise.resolve({ ok: false, status: 404, reason: 'grant_not_found', issues: [] });
    grant.revokedAt ??= '2026-01-02T00:00:00.000Z';
    return Promise.resolve({ ok: true, value: { grant: { ...grant }, endedConnections: 2 } });
  }

  forgetGrant(id: string): Promise<ControlResult<{ readonly grant: GrantView; readonly endedConnections: number }>> {
    const grant = this.grants.get(id);
    if (grant === undefined) return Promise.resolve({ ok: false, status: 404, reason: 'grant_not_found', issues: [] });
    if (grant.source !== 'runtime') return Promise.resolve({ ok: false, status: 409, reason: 'grant_from_config', issues: [] });
    this.grants.delete(id);
    return Promise.resolve({ ok: true, value: { grant: { ...grant, revokedAt: grant.revokedAt ?? '2026-01-02T00:00:00.000Z' }, endedConnections: 1 } });
  }

  revokeGeneration(generation: string): Promise<ControlResult<{ readonly revoked: readonly string[]; readonly endedConnections: number }>> {
    const revoked = [...this.grants.values()].filter((g) => g.generation === generation && g.revokedAt === null);
    for (const g of revoked) g.revokedAt = '2026-01-02T00:00:00.000Z';
    return Promise.resolve({ ok: true, value: { revoked: revoked.map((g) => g.id), endedConnections: revoked.length } });
  }

  rotateGrant(id: string, graceMs: number): Promise<ControlResult<{ readonly id: string; readonly token: string; readonly grant: GrantView; readonly previousTokenUntil: string | null; readonly endedConnections: number }>> {
    const grant = this.grants.get(id);
    if (grant === undefined) return Promise.resolve({ ok: false, status: 404, reason: 'grant_not_found', issues: [] });
    if (grant.source !== 'runtime') return Promise.resolve({ ok: false, status: 409, reason: 'grant_from_config', issues: [] });
    const token = randomBytes(24).toString('base64url');
    this.issuedTokens.push(token);
    const previousTokenUntil = graceMs > 0 ? new Date(Date.parse('2026-01-01T00:00:00.000Z') + graceMs).toISOString() : null;
    return Promise.resolve({ ok: true, value: { id, token, grant: { ...grant }, previousTokenUntil, endedConnections: 0 } });
  }

  /** Pending asks GET /v1/asks lists; answerAsk removes one and remembers it (409 on a second answer). */
  asks: AskPending[] = [];
  answeredAsks = new Set<string>();

  listAsks(): Promise<readonly AskPending[]> {
    return Promise.resolve(this.asks);
  }

  async answerAsk(id: string, body: unknown): Promise<ControlResult<{ readonly ask: string; readonly decision: string; readonly scope: string }>> {
    const fields = (body ?? {}) as Record<string, unknown>;
    if (fields['decision'] !== 'allow' && fields['decision'] !== 'deny') return { ok: false, status: 400, reason: 'ask_answer_invalid', issues: [{ path: 'decision', message: 'expected "allow" or "deny"' }] };
    if (this.answeredAsks.has(id)) return { ok: false, status: 409, reason: 'ask_answered', issues: [] };
    if (!this.asks.some((a) => a.ask === id)) return { ok: false, status: 404, reason: 'ask_not_found', issues: [] };
    this.asks = this.asks.filter((a) => a.ask !== id);
    this.answeredAsks.add(id);
    return { ok: true, value: { ask: id, decision: String(fields['decision']), scope: String(fields['scope'] ?? 'once') } };
  }

  reload(): Promise<ControlResult<ReloadOutcome>> {
    return Promise.resolve(this.reloadResult);
  }

  readiness(): { readonly ready: boolean; readonly detail: string } {
    return { ready: this.ready, detail: this.ready ? 'listening' : 'draining' };
  }
}

export interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly obj: object;
  readonly msg: string;
}

export function captureLog(): { lines: LogLine[]; log: { info(o: object, m: string): void; warn(o: object, m: string): void; error(o: object, m: string): void } } {
  const lines: LogLine[] = [];
  return {
    lines,
    log: {
      info: (obj, msg) => lines.push({ level: 'info', obj, msg }),
      warn: (obj, msg) => lines.push({ level: 'warn', obj, msg }),
      error: (obj, msg) => lines.push({ level: 'error', obj, msg }),
    },
  };
}

export type Target = { readonly socketPath: string } | { readonly host: string; readonly port: number };

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly json: unknown;
}

/** One request on a fresh connection; `body` as a string is sent verbatim, `chunked` omits content-length. */
export function call(target: Target, method: string, path: string, options: { body?: string | Buffer; headers?: Record<string, string>; chunked?: boolean } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...options.headers };
    if (options.body !== undefined && options.chunked !== true) headers['content-length'] = Buffer.byteLength(options.body);
    const req = http.request({ ...target, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown = null;
        try {
          json = JSON.parse(text);
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.once('error', reject);
    req.end(options.body);
  });
}
