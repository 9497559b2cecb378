// Which files of a running Sluice `sluice run` keeps from the command (review 2026-12-04
// finding 5): `cd ~/proj && sluice start --config ~/.config/sluice.yaml` keeps ./state and the audit
// file in the project, so they are resolved against Sluice's working directory, wherever the config
// lies; every secret and socket the YAML names counts, and so do run-time grant sockets in its ledger.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sluiceFilesOf } from '../../../src/cli/index.js';

let root: string;
let etc: string;
let project: string;

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-files-')));
  etc = path.join(root, 'etc');
  project = path.join(root, 'proj');
  fs.mkdirSync(etc);
  fs.mkdirSync(path.join(project, 'state'), { recursive: true });
  fs.writeFileSync(
    path.join(etc, 'sluice.yaml'),
    [
      'listeners:',
      '  - { name: shared, listen: "127.0.0.1:3180", identify: token }',
      '  - { name: a, listen: "unix:./run/a.sock", grant: a, tls: { certFile: ./tls/cert.pem, keyFile: ./tls/key.pem } }',
      'admin: { listen: "unix:./state/admin.sock" }',
      'audit: { file: ./audit.jsonl }',
      'route: { mode: proxy, proxy: [{ url: "http://p:1", credentialsFile: ./secrets/corp.txt }], pac: { file: ./corp.pac } }',
      '',
    ].join('\n'),
  );
  const ledger = { v: 1, runtime: [{ id: 'g', spec: { listen: `unix:${path.join(root, 'agents/c.sock')}` } }, { id: 'h', spec: {} }], revoked: [] };
  fs.writeFileSync(path.join(project, 'state/ledger.json'), JSON.stringify(ledger), { mode: 0o600 });
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('sluiceFilesOf', () => {
  it('resolves every path of the config against Sluice’s working directory, not the config’s', async () => {
    const files = await sluiceFilesOf(path.join(etc, 'sluice.yaml'), project, [project]);
    for (const p of ['state', 'audit.jsonl', 'run/a.sock', 'tls/key.pem', 'tls/cert.pem', 'secrets/corp.txt', 'corp.pac']) expect(files, p).toContain(path.join(project, p));
    expect(files).toContain(path.join(etc, 'sluice.yaml'));
    expect(files).toContain(path.join(project, 'state')); // the admin socket's directory
    expect(files.some((f) => f.startsWith(etc) && f !== path.join(etc, 'sluice.yaml'))).toBe(false);
  });

  it('adds the sockets of grants issued at run time, from the ledger', async () => {
    expect(await sluiceFilesOf(path.join(etc, 'sluice.yaml'), project, [project])).toContain(path.join(root, 'agents/c.sock'));
  });

  it('does not parse a config none of whose files can lie under a shown tree', async () => {
    expect(await sluiceFilesOf(path.join(etc, 'sluice.yaml'), project, [path.join(root, 'elsewhere')])).toEqual([path.join(etc, 'sluice.yaml')]);
  });

  it('parses when a shown tree holds Sluice’s working directory, or the YAML climbs out of it', async () => {
    expect(await sluiceFilesOf(path.join(etc, 'sluice.yaml'), project, [root])).toContain(path.join(project, 'state'));
    const climbing = path.join(etc, 'climb.yaml');
    fs.writeFileSync(climbing, 'state: ../proj/state\n');
    expect(await sluiceFilesOf(climbing, etc, [project])).toContain(path.join(project, 'state'));
  });

  it('counts the default state directory for a config it cannot read or parse', async () => {
    expect(await sluiceFilesOf(path.join(etc, 'missing.yaml'), project, [project])).toContain(path.join(project, 'state'));
    const broken = path.join(etc, 'broken.yaml');
    fs.writeFileSync(broken, 'state: [unclosed\n');
    expect(await sluiceFilesOf(broken, project, [project])).toContain(path.join(project, 'state'));
  });
});
