// Resource accounting for the fault and soak tests: counts of the process's active handles and requests
// by type (process.getActiveResourcesInfo()), and a bounded wait until they are back near a baseline.
import { waitUntil } from '../support/wait.js';

export type ResourceCounts = Readonly<Record<string, number>>;

export function resourceCounts(): ResourceCounts {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/** Types whose count is above `baseline + slack`, as `type: now (baseline)`. */
export function resourceExcess(baseline: ResourceCounts, slack: Readonly<Record<string, number>> = {}): string[] {
  const now = resourceCounts();
  const out: string[] = [];
  for (const [type, count] of Object.entries(now)) {
    const allowed = (baseline[type] ?? 0) + (slack[type] ?? 0);
    if (count > allowed) out.push(`${type}: ${count} (baseline ${baseline[type] ?? 0}, slack ${slack[type] ?? 0})`);
  }
  return out;
}

/** Waits (bounded) until no resource type exceeds its baseline plus slack; throws with the excess. */
export async function expectResourcesSettle(baseline: ResourceCounts, opts: { timeoutMs?: number; slack?: Readonly<Record<string, number>>; label: string }): Promise<void> {
  try {
    await waitUntil(() => resourceExcess(baseline, opts.slack).length === 0, { timeoutMs: opts.timeoutMs ?? 5000, label: opts.label });
  } catch {
    throw new Error(`${opts.label}: resources did not return to baseline: ${resourceExcess(baseline, opts.slack).join(', ')}`);
  }
}

/** What these helpers need of a running Sluice (TestSluice or an app started by hand). */
export interface WithListeners {
  readonly app: { readonly listeners: readonly { readonly sockets: { readonly size: number } }[] };
}

/** Client sockets Sluice still holds, over every listener. */
export function liveClientSockets(sluice: WithListeners): number {
  return sluice.app.listeners.reduce((n, l) => n + l.sockets.size, 0);
}

export async function expectSluiceIdle(sluice: WithListeners, label: string, timeoutMs = 5000): Promise<void> {
  await waitUntil(() => liveClientSockets(sluice) === 0, { timeoutMs, label: `${label}: Sluice holds no client socket` });
}
