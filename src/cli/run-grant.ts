// A grant owned by one `sluice run`: issued through the admin API with its own dedicated socket (in a
// fresh 0700 directory) and generation label, and revoked when the run ends. The token Sluice returns
// is dropped on the spot: the sandbox acts through the socket, and nothing here prints or keeps it.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { callAdmin } from './grant.js';
import { followRunDenials } from './run-summary.js';

export interface RunGrantRequest {
  /** `unix:/path/admin.sock` or `http://host:port`. */
  readonly admin: string;
  readonly adminToken?: string | undefined;
  /** The POST /v1/grants body without `listen` and `generation` (destinations, classes, limits). */
  readonly spec: Readonly<Record<string, unknown>>;
  readonly generation?: string | undefined;
}

export interface RunGrant {
  readonly id: string;
  readonly socket: string;
  /** Revokes and forgets the grant and removes its directory; resolves with an error message, or null. */
  revoke(): Promise<string | null>;
  /** What the command was refused, to print when it ends; null when nothing was. */
  refusals(): Promise<string | null>;
}

export type RunGrantResult = { readonly ok: true; readonly grant: RunGrant } | { readonly ok: false; readonly message: string };

export interface PendingRunGrant {
  /** Where the grant's socket will be once issued (in a fresh 0700 directory of the caller's). */
  readonly socket: string;
  readonly issued: Promise<RunGrantResult>;
  /**
   * Removes the socket's directory. A failed issue leaves it until the run calls this after its sandbox
   * is gone: bubblewrap may be binding it at that moment, and a vanished source makes bwrap print its
   * own error before the run's (UX review 2026-12-04 finding 7).
   */
  discard(): void;
}

/** Starts issuing; the socket path is known at once, so the sandbox can be built meanwhile. */
export function beginRunGrant(request: RunGrantRequest): PendingRunGrant {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-run-'));
  const socket = path.join(dir, 'grant.sock');
  return { socket, issued: issue(request, dir, socket), discard: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

async function issue(request: RunGrantRequest, dir: string, socket: string): Promise<RunGrantResult> {
  const generation = request.generation ?? `sluice-run-${randomBytes(6).toString('hex')}`;
  const body = { ...request.spec, generation, listen: `unix:${socket}` };
  try {
    const answer = await callAdmin(request.admin, request.adminToken, { method: 'POST', path: '/v1/grants', body });
    const issued = answer.body as { id?: unknown; error?: unknown; issues?: readonly { path: string; message: string }[] };
    if (answer.status !== 201 || typeof issued.id !== 'string') {
      const issues = (Array.isArray(issued.issues) ? issued.issues : []).map((i) => `; ${i.path}: ${i.message}`).join('');
      return { ok: false, message: `the admin API refused the run's grant: ${answer.status} ${typeof issued.error === 'string' ? issued.error : ''}${issues}` };
    }
    const id = issued.id;
    const revoke = async (): Promise<string | null> => {
      try {
        // Forget, not only revoke: a run-owned grant is gone with its run, and the ledger stays bounded.
        const forgotten = await callAdmin(request.admin, request.adminToken, { method: 'POST', path: `/v1/grants/${encodeURIComponent(id)}/forget` });
        return forgotten.status === 200 || forgotten.status === 404 ? null : `admin API answered ${forgotten.status}`;
      } catch (error) {
        return (error as Error).message;
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    };
    // Followed from before the command starts, so its first refusal is told too.
    const denials = await followRunDenials(request.admin, request.adminToken, id);
    return { ok: true, grant: { id, socket, revoke, refusals: () => denials.finish() } };
  } catch (error) {
    return { ok: false, message: `cannot issue the run's grant: ${(error as Error).message}` };
  }
}
