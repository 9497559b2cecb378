#!/usr/bin/env node
// `npm run bench:guard` (issue 26, item 4): a few minutes of bench/run.mjs, Sluice as users run it
// (sluice-real) interleaved with the two Node floors, judged by same-round ratios against
// bench/guard-thresholds.json. Exit 0 within every bound, 1 beyond one, 2 when the bench could not
// measure. Saves nothing and leaves docs/benchmarks.md alone. Run it before landing a change to relay/,
// proxy/ or audit/; not in CI (the machines are noisy). See bench/README.md, "The guard".
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { judge, parseRoundLine } from './guard-verdict.mjs';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const TARGETS = ['netfloor', 'floor', 'sluice-real'];
const SCENARIOS = ['latency', 'rate', 'bulk', 'bulkup'];
const DEFAULT_ROUNDS = 6;

function usage() {
  return `usage: npm run bench:guard [-- options]
  --rounds N            rounds of the quick scenarios (default ${DEFAULT_ROUNDS}; at least 2)
  --thresholds FILE     bounds to judge by (default bench/guard-thresholds.json)
  --sluice-bin FILE     guard another Sluice entry (as bench/run.mjs; implies --no-build)
  --no-build, --no-pin, --nice N   passed to bench/run.mjs
  -h, --help`;
}

function fail(msg) {
  console.error(`bench:guard: ${msg}`);
  process.exit(2);
}

const argv = process.argv.slice(2);
let rounds = DEFAULT_ROUNDS;
let thresholdsFile = path.join(BENCH, 'guard-thresholds.json');
const passThrough = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const next = () => (i + 1 < argv.length ? argv[++i] : fail(`${a} needs a value`));
  if (a === '--rounds') rounds = Number(next());
  else if (a === '--thresholds') thresholdsFile = path.resolve(next());
  else if (a === '--sluice-bin' || a === '--nice') passThrough.push(a, next());
  else if (a === '--no-build' || a === '--no-pin') passThrough.push(a);
  else if (a === '-h' || a === '--help') {
    console.log(usage());
    process.exit(0);
  } else fail(`unknown option ${a}\n${usage()}`);
}
if (!Number.isInteger(rounds) || rounds < 2 || rounds > 20) fail('--rounds must be 2..20');
const { thresholds } = JSON.parse(fs.readFileSync(thresholdsFile, 'utf8'));

const args = [path.join(BENCH, 'run.mjs'), '--quick', '--rounds', String(rounds), '--targets', TARGETS.join(','), '--scenarios', SCENARIOS.join(','), '--no-save', '--no-doc', ...passThrough];
console.error(`bench:guard: node ${args.map((a) => path.relative(process.cwd(), a) || a).join(' ')}`);
const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
const stop = (signal) => child.kill(signal);
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));

const parsed = [];
const lines = readline.createInterface({ input: child.stderr });
lines.on('line', (line) => {
  process.stderr.write(`${line}\n`);
  const r = parseRoundLine(line);
  if (r) parsed.push(r);
});
const code = await new Promise((resolve) => child.once('exit', (c, s) => resolve(c ?? (s ? 128 : 1))));
if (code !== 0) fail(`bench/run.mjs exited ${code}`);

const failures = parsed.flatMap((r) => r.failures.map((f) => `round ${r.round} ${r.target}: ${f}`));
const verdict = judge(parsed, thresholds, { subject: 'sluice-real', minRounds: 2 });
const fmt = (x) => (x === null ? '-' : x.toFixed(2));
const rows = verdict.results.map((r) => {
  const bound = r.min !== undefined ? `>= ${r.min}` : `<= ${r.max}`;
  return `| ${r.measure} | ${r.floor} | ${r.ratios.map(fmt).join(' ')} | ${fmt(r.median)} | ${bound} | ${r.status === 'ok' ? 'ok' : r.status.toUpperCase()} |`;
});
console.log(`\nbench:guard, ${rounds} rounds, sluice-real ÷ floor per round (${path.relative(process.cwd(), thresholdsFile)})\n`);
console.log('| measure | floor | per round | median | bound | |\n|---|---|---|---|---|---|');
console.log(rows.join('\n'));
for (const f of failures) console.log(`scenario failed: ${f}`);
if (verdict.results.some((r) => r.status === 'missing') || failures.length > 0) {
  console.log('\nbench:guard: could not measure every bound (see above)');
  process.exit(2);
}
if (!verdict.ok) {
  console.log(`\nbench:guard: FAILED: ${verdict.results.filter((r) => r.status === 'fail').map((r) => `${r.measure} vs ${r.floor}`).join(', ')} beyond the recorded bounds`);
  process.exit(1);
}
console.log('\nbench:guard: within every bound');
