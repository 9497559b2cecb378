// Turns `listeners[].socketGroup` (a group name or a numeric gid) into a gid; reads the group file only.
// Node has no getgrnam(), so a name is looked up in /etc/group; groups that only a directory service
// (LDAP, sssd) knows must be given as a number.
import fs from 'node:fs/promises';

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
