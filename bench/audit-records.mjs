// Time and JS-heap allocation per hop of writing its two audit records (decision and close) through the
// file sink, as run-hop.ts does: `node bench/audit-records.mjs [dist] [object|fast]` after `npm run build`
// (dist defaults to ../dist; pass another build, e.g. of an older commit, to compare). The sink writes to
// /dev/null, so the batch writer's fs.write calls are in the numbers but no disk is.
// Allocation is measured as bench/gc-probe.mjs does: V8 frees heap memory only in a GC, so with a
// v8.GCProfiler running, allocated ≈ Σ (used before GC i − used after GC i−1) from start to stop. It
// counts the JS heap only, not Buffer backing stores (the batch buffers are reused anyway).
// Modes: `object` builds the Decision value and the close record and calls sink.write (all a sink had
// before the fast path; still the path of a sink without it); `fast` calls writeDecision/writeClose
// when the build has them (the default then). Prints one JSON line: medians of 5 rounds of 100,000 hops.
// Only node: builtins.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';

const dist = path.resolve(process.argv[2] ?? new URL('../dist', import.meta.url).pathname);
const load = (file) => import(pathToFileURL(path.join(dist, file)).href);
const { Hop, decisionOf } = await load('proxy/index.js');
const { closeRecordOf, recordClose, recordDecision } = await load('proxy/hop/audit-hop.js');
const { createFileSink } = await load('audit/index.js');
const { NoopMetrics } = await load('telemetry/index.js');
const { canonicalize } = await load('authority/index.js');

const HOPS = 100_000;
// Hops between two turns of the event loop (SLUICE_BENCH_CHUNK), when the writer's fs.write callbacks run.
const CHUNK = Number(process.env.SLUICE_BENCH_CHUNK ?? 50);
const ROUNDS = 5;

// The sluice-real hop of the benchmark: a Basic token, an IP-literal target, one loopback address, direct.
function tunnelHop() {
  const hop = new Hop(1, 'connect', 'CONNECT', '127.0.0.1:18080');
  const dest = canonicalize('127.0.0.1:18080');
  if (!dest.ok) throw new Error('canonicalize');
  hop.canonical = dest.value;
  hop.principal = { grantId: 'bench', via: 'token' };
  hop.rule = 'tcp://127.0.0.1:18080';
  hop.addresses = [{ address: '127.0.0.1', family: 4, class: 'loopback', allowed: true }];
  const pinned = { address: '127.0.0.1', family: 4, port: 18080, class: 'loopback' };
  hop.pinned = [pinned];
  hop.dialed = pinned;
  hop.route = { label: 'direct', mode: 'direct', hops: [{ kind: 'direct' }], pacAnswer: null };
  hop.routeHops = hop.route.hops;
  hop.usedHop = hop.routeHops[0];
  hop.identifyUs = 41;
  hop.authorizeUs = 52;
  hop.routeUs = 55;
  hop.resolveUs = 57;
  hop.dialUs = 212;
  hop.firstByteUs = 380;
  return hop;
}

const place = { id: 'c1a2b', listener: 'shared', auditSource: '127.0.0.1' };
const closed = { closedBy: 'client_closed', status: 200, bytesUp: 517, bytesDown: 4096 };
const metrics = new NoopMetrics();
const sink = createFileSink('/dev/null', { onError: (e) => { throw e; }, onWarning: () => undefined });
const hop = tunnelHop();
const isNewApi = 'isDecided' in hop;

function recordObjects() {
  if (isNewApi) {
    // What recordDecision and recordClose do for a sink without the fast path.
    hop.decision = decisionOf(hop, place, Date.now());
    sink.write(hop.decision);
    metrics.decision(hop.reason, hop.kind);
    sink.write(closeRecordOf(hop, place, closed, Date.now()));
    metrics.closed(closed.closedBy);
  } else {
    recordDecision(sink, decisionOf(hop, place), metrics);
    recordClose(sink, place, hop, closed, metrics);
  }
}

function recordFast() {
  hop.decidedAtMs = Date.now(); // as HopRun.decide does
  recordDecision(sink, place, hop, metrics);
  recordClose(sink, place, hop, closed, metrics);
}

async function run(record) {
  const profiler = new v8.GCProfiler();
  profiler.start();
  const used0 = v8.getHeapStatistics().used_heap_size;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < HOPS; i += CHUNK) {
    for (let j = 0; j < CHUNK; j++) record();
    // Let the writer's fs.write callbacks run, as the event loop would between hops.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const ns = Number(process.hrtime.bigint() - t0);
  const used1 = v8.getHeapStatistics().used_heap_size;
  const data = profiler.stop();
  let allocated = 0;
  let prev = used0;
  for (const s of data.statistics) {
    allocated += Math.max(0, s.beforeGC.heapStatistics.usedHeapSize - prev);
    prev = s.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += Math.max(0, used1 - prev);
  return { nsPerHop: Math.round(ns / HOPS), bytesPerHop: Math.round(allocated / HOPS), gcs: data.statistics.length };
}

const mode = process.argv[3] ?? (isNewApi ? 'fast' : 'object');
if (mode === 'fast' && !(isNewApi && sink.writeDecision !== undefined)) throw new Error(`${dist} has no fast path`);
const record = mode === 'fast' ? recordFast : recordObjects;
await run(record); // warm-up
const results = [];
for (let round = 0; round < ROUNDS; round++) results.push(await run(record));
const median = (key) => results.map((r) => r[key]).sort((a, b) => a - b)[results.length >> 1];
console.log(JSON.stringify({ dist, mode, hops: HOPS, rounds: ROUNDS, nsPerHop: median('nsPerHop'), bytesPerHop: median('bytesPerHop'), gcs: median('gcs') }));
await sink.flush();
