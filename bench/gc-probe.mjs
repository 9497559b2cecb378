// A preload for the Node targets of the benchmark: `node --import <file URL of this module> …`, with
// SLUICE_BENCH_GC_PROBE=<unix socket path> in the environment. It changes nothing in the program it is
// loaded into. It listens on that socket (unref'd: it never keeps the process alive) and answers one
// JSON line per command line:
//   start  → starts a v8.GCProfiler and reads the used heap size; answers {"ok":true}
//   stop   → stops it and answers what happened in between: GC count and main-thread GC time by type,
//            and an estimate of the bytes allocated on the JS heap (see below)
// Allocation estimate: V8 frees heap memory only in a GC, so between two GCs the used heap size only
// grows by what was allocated. The GCProfiler records the used heap size before and after every GC;
// allocated ≈ Σ (used before GC i − used after GC i−1), from the `start` reading to the `stop` reading.
// It counts every JS heap space (young generation, old space, large objects), not ArrayBuffer backing
// stores (Buffers), which live outside the JS heap. GC time is the GCProfiler's `cost` of each GC:
// the time between V8's GC prologue and epilogue on the main thread, in µs (the work of concurrent
// marking and sweeping threads is not in it).
// Without the environment variable it does nothing. Only node: builtins.
import net from 'node:net';
import fs from 'node:fs';
import v8 from 'node:v8';

const SOCK = process.env.SLUICE_BENCH_GC_PROBE;
delete process.env.SLUICE_BENCH_GC_PROBE; // not inherited by anything the target starts

let profiler = null;
let used0 = 0;
let t0 = 0;

function median(v) {
  if (v.length === 0) return null;
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const spaceUsed = (stats, name) => stats.heapSpaceStatistics.find((s) => s.spaceName === name)?.spaceUsedSize ?? 0;

function start() {
  if (profiler) profiler.stop();
  profiler = new v8.GCProfiler();
  profiler.start();
  used0 = v8.getHeapStatistics().used_heap_size;
  t0 = performance.now();
  return { ok: true };
}

function stop() {
  if (!profiler) return { ok: false, error: 'not started' };
  const used1 = v8.getHeapStatistics().used_heap_size;
  const data = profiler.stop();
  profiler = null;
  let allocated = 0;
  let prev = used0;
  const byType = {};
  const scavengeSurvivors = [];
  let pauseUs = 0;
  for (const s of data.statistics) {
    const before = s.beforeGC.heapStatistics.usedHeapSize;
    const after = s.afterGC.heapStatistics.usedHeapSize;
    allocated += Math.max(0, before - prev);
    prev = after;
    pauseUs += s.cost;
    const t = (byType[s.gcType] ??= { count: 0, costUs: 0 });
    t.count++;
    t.costUs += s.cost;
    if (s.gcType === 'Scavenge') {
      // what the scavenge kept: left in the young generation, plus what it promoted to old space
      const promoted = Math.max(0, spaceUsed(s.afterGC, 'old_space') - spaceUsed(s.beforeGC, 'old_space'));
      scavengeSurvivors.push(spaceUsed(s.afterGC, 'new_space') + promoted);
    }
  }
  allocated += Math.max(0, used1 - prev);
  return {
    ok: true,
    wallMs: performance.now() - t0,
    gcCount: data.statistics.length,
    gcPauseUs: pauseUs,
    gcByType: byType,
    allocatedBytes: allocated,
    scavengeSurvivorsMedianBytes: median(scavengeSurvivors),
    usedHeapStart: used0,
    usedHeapEnd: used1,
  };
}

if (SOCK) {
  try {
    fs.rmSync(SOCK, { force: true });
  } catch {}
  const server = net.createServer((c) => {
    c.unref();
    c.setEncoding('utf8');
    let buf = '';
    c.on('error', () => {});
    c.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const cmd = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        let answer;
        try {
          answer = cmd === 'start' ? start() : cmd === 'stop' ? stop() : { ok: false, error: `unknown command ${cmd}` };
        } catch (e) {
          answer = { ok: false, error: String(e?.message ?? e) };
        }
        c.write(`${JSON.stringify(answer)}\n`);
      }
    });
  });
  server.on('error', () => {});
  server.listen(SOCK);
  server.unref();
}
