#!/usr/bin/env node
// How long a short confined command takes: `sluice run -- true`, as an agent shell starts many of
// them (issue 12: under 300 ms). Measured in the same interleaved run against its floors: one Node boot
// (`node -e 0`), bubblewrap alone with the same namespaces (`bwrap … true`), and both together. Sluice
// runs as users run it: a real `sluice start` with a dedicated grant socket and an admin socket, and
// the run-owned mode (`--destination`, which issues and forgets a grant per run) measured beside it.
// Standalone: `npm run bench:sandbox [-- --runs N]`; `npm run bench` includes it when bwrap is installed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = path.join(ROOT, 'bin/sluice.js');
const BWRAP_FLOOR = ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--ro-bind', '/usr', '/usr',
  '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'];

/** Why the measurement cannot run here, or null. */
export function sandboxStartUnavailable() {
  const probe = spawnSync('bwrap', [...BWRAP_FLOOR, '--', '/usr/bin/true'], { timeout: 10_000 });
  if (probe.error) return `bwrap not found (${probe.error.code})`;
  return probe.status === 0 ? null : `bwrap cannot create namespaces here: ${String(probe.stderr).trim()}`;
}

/** Wall and CPU (user+sys of the whole process tree, from /usr/bin/time) of one command. */
function timeOnce(cmd, args, cwd) {
  const started = process.hrtime.bigint();
  const r = spawnSync('/usr/bin/time', ['-f', 'CPU %U %S', cmd, ...args], { cwd, encoding: 'utf8', timeout: 30_000 });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.trim().slice(-300)}`);
  const cpu = /CPU (\d+\.\d+) (\d+\.\d+)\s*$/.exec(r.stderr);
  return { wallMs, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : NaN };
}

function startSluice(dir) {
  fs.writeFileSync(path.join(dir, 'sluice.yaml'), [
    'listeners:',
    '  - { name: shared, listen: 127.0.0.1:0, identify: token }',
    `  - { name: bench, listen: "unix:${dir}/state/bench.sock", grant: bench }`,
    `admin: { listen: "unix:${dir}/state/admin.sock" }`,
    `state: ${dir}/state`,
    `audit: { file: ${dir}/audit.jsonl }`,
    'grants:',
    '  - { id: bench, tokenSha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, destinations: ["https://example.test"] }',
    '',
  ].join('\n'));
  const child = spawn(process.execPath, [BIN, 'start', '--config', path.join(dir, 'sluice.yaml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 15_000;
    const poll = () => {
      if (fs.existsSync(path.join(dir, 'state/admin.sock')) && fs.existsSync(path.join(dir, 'state/bench.sock'))) return resolve(child);
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        return reject(new Error(`sluice did not start: ${stderr.slice(-300)}`));
      }
      setTimeout(poll, 20);
    };
    poll();
  });
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

function stats(samples) {
  const wall = samples.map((s) => s.wallMs).sort((a, b) => a - b);
  const cpu = samples.map((s) => s.cpuMs).filter(Number.isFinite).sort((a, b) => a - b);
  return { runs: wall.length, medianMs: quantile(wall, 0.5), p90Ms: quantile(wall, 0.9), minMs: wall[0], maxMs: wall.at(-1), cpuMedianMs: cpu.length ? quantile(cpu, 0.5) : null };
}

/** Runs every case `runs` times, interleaved; returns per-case statistics. */
export async function measureSandboxStart({ runs = 30 } = {}) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-run-')));
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const sluice = await startSluice(dir);
  const grantSocket = path.join(dir, 'state/bench.sock');
  const cases = {
    node: [process.execPath, ['-e', '0']],
    bwrap: ['bwrap', [...BWRAP_FLOOR, '--', '/usr/bin/true']],
    bwrapNode: ['bwrap', [...BWRAP_FLOOR, '--ro-bind', process.execPath, process.execPath, '--', process.execPath, '-e', '0']],
    sluiceRun: [process.execPath, [BIN, 'run', '--grant-socket', grantSocket, '--', 'true']],
    sluiceRunOwned: [process.execPath, [BIN, 'run', '--admin', `unix:${dir}/state/admin.sock`, '--destination', 'https://example.test', '--', 'true']],
  };
  const samples = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  try {
    for (const [cmd, args] of Object.values(cases)) timeOnce(cmd, args, work); // warm the page cache
    for (let i = 0; i < runs; i++) {
      const order = Object.keys(cases);
      for (let j = 0; j < order.length; j++) {
        const name = order[(i + j) % order.length];
        const [cmd, args] = cases[name];
        samples[name].push(timeOnce(cmd, args, work));
      }
    }
  } finally {
    sluice.kill('SIGTERM');
    await new Promise((r) => (sluice.exitCode !== null ? r() : sluice.once('exit', r)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, stats(v)]));
}

const LABELS = {
  node: 'Node boot (`node -e 0`)',
  bwrap: 'bubblewrap alone (`bwrap … true`)',
  bwrapNode: 'bubblewrap + Node boot (the floor of a Node init)',
  sluiceRun: '`sluice run --grant-socket S -- true`',
  sluiceRunOwned: '`sluice run --destination URL -- true` (issue + forget a grant)',
};

export function renderSandboxStart(result) {
  const f = (x) => (x === null || x === undefined ? '-' : x.toFixed(0));
  const lines = ['| command | runs | median ms | p90 ms | min–max ms | CPU median ms |', '|---|---|---|---|---|---|'];
  for (const [k, s] of Object.entries(result)) lines.push(`| ${LABELS[k] ?? k} | ${s.runs} | ${f(s.medianMs)} | ${f(s.p90Ms)} | ${f(s.minMs)}–${f(s.maxMs)} | ${f(s.cpuMedianMs)} |`);
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--runs');
  const runs = i === -1 ? 30 : Number(process.argv[i + 1]);
  const reason = sandboxStartUnavailable();
  if (reason) {
    console.error(`bench:sandbox: ${reason}`);
    process.exit(1);
  }
  const result = await measureSandboxStart({ runs });
  console.log(renderSandboxStart(result));
}
