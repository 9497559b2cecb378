// The admin section's checks that need the host (the socket's directory, the token variable): run by
// buildRuntime, so `check-config` and `start` refuse the same configs with the same key paths
// (review 2026-12 finding 10).
import type { AdminSection, ConfigIssue } from '../config/index.js';
import { resolveAdminTokenSha256 } from './auth.js';
import { inspectAdminSocketDir } from './socket-dir.js';

export async function checkAdminSection(admin: AdminSection, env: Readonly<Record<string, string | undefined>>): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  if (admin.listen !== undefined) {
    const { refusal } = await inspectAdminSocketDir(admin.listen);
    if (refusal !== null) issues.push({ path: 'admin.listen', message: refusal });
  }
  try {
    resolveAdminTokenSha256(admin, env);
  } catch (error) {
    issues.push({ path: 'admin.tokenEnv', message: (error as Error).message });
  }
  return issues;
}
