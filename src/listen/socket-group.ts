// Turns `listeners[].socketGroup` (a group name or a numeric gid) into a gid; reads the group file only.
// Node has no getgrnam(), so a name is looked up in /etc/group; groups that only a directory service
// (LDAP, sssd) knows must be given as a number.
import fs from 'node:fs/promises';
import type { ConfigIssue, ListenerSection } from '../config/index.js';

export const GROUP_FILE = '/etc/group';

/** The gid for `group`, or null when no group has that name. */
export async function resolveSocketGroup(group: string | number, groupFile = GROUP_FILE): Promise<number | null> {
  if (typeof group === 'number') return group;
  if (/^\d+$/.test(group)) return Number(group);
  const text = await fs.readFile(groupFile, 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    // name:password:gid:members (group(5))
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  return null;
}

/** Every `listeners[].socketGroup` must name a group when the config is checked, not at the first start. */
export async function checkSocketGroups(listeners: readonly ListenerSection[]): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  for (const [i, listener] of listeners.entries()) {
    if (listener.socketGroup !== undefined && (await resolveSocketGroup(listener.socketGroup)) === null) {
      issues.push({ path: `listeners[${i}].socketGroup`, message: `no group named "${listener.socketGroup}" in ${GROUP_FILE} (give a numeric gid for a directory-service group)` });
    }
  }
  return issues;
}
