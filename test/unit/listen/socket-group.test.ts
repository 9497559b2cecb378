// listeners[].socketGroup: a group name is looked up in the group file (group(5)); a number, or a string
// of digits, is a gid as it stands; an unknown name is null, which app.ts reports as a config issue.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSocketGroup } from '../../../src/listen/index.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-groups-'));
const groupFile = path.join(dir, 'group');
fs.writeFileSync(groupFile, ['root:x:0:', 'sluice-sandboxes:x:21010:alice,bob', 'broken-line', 'nogid:x::', ''].join('\n'));

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('resolveSocketGroup', () => {
  it.each([
    ['sluice-sandboxes', 21010],
    ['root', 0],
    [21011, 21011],
    ['21012', 21012],
    ['nobody-here', null],
    ['nogid', null],
    ['sluice', null], // a prefix of a name is not that name
  ] as const)('%j → %j', async (group, gid) => {
    expect(await resolveSocketGroup(group, groupFile)).toBe(gid);
  });

  it('answers null, not a throw, when the group file cannot be read', async () => {
    expect(await resolveSocketGroup('root', path.join(dir, 'missing'))).toBeNull();
  });
});
