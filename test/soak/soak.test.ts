// Soak (issue #5, "Done means"): 1,000 concurrent CONNECT tunnels through one in-process Sluice to a
// loopback echo server for a bounded time (SLUICE_SOAK_MS, default 20 s, at most 60 s), mixing echo
// traffic (every byte checked), slow readers that stop reading (some push until the whole path is full:
// Sluice must push back, not buffer), client resets (RST), and slowloris heads (answered 408
// request_timeout). Afterwards Sluice holds no client socket, every tunnel has its close record, active
// handles and timers are back at the baseline, and RSS after a forced GC stays within a stated bound.
//
// Memory is compared twice: against the process before any load (cold; printed) and against the process
// after a 10 s warm-up run of the same mix (asserted). The warm-up lets V8, the buffer pools and the
// allocator's arenas reach their working size, so what remains is growth caused by the soak itself.
// Asserted: glibc's main heap and RSS outside the V8 heap's resident pages (V8 sizes its young generation
// as it likes; live heap is asserted on its own), in the `soak` project of vitest.config.ts, whose
// allocator settings give freed buffers back to the system.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel, parseResponseHead } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';
import { liveClientSockets, resourceCounts, resourceExcess, type ResourceCounts } from '../faults/leak-check.js';

const SOAK_MS = Math.min(60_000, Math.max(5_000, Number(process.env['SLUICE_SOAK_MS'] ?? 20_000)));
const WARMUP_MS = 10_000;
const WANTED_TUNNELS = 1000;
const RESET_SLOTS = 150; // churning tunnels on top of the long-lived ones
const SLOWLORIS = 100;
/**
 * Growth warm to after of glibc's main heap (`[heap]`, where Node's and libuv's per-socket C++ objects
 * are allocated) and of all RSS outside the V8 heap's resident pages. The main heap rises to a plateau
 * under this mix and stays there: Node 20 +19-21 MiB after the 10 s warm-up whether the soak runs 20 s
 * (2,600 tunnels opened) or 45 s (4,600); Node 24, which reaches it sooner, +0-7 MiB. A leak of about
 * 12 KiB per tunnel opened crosses the bound. RSS outside the V8 heap also counts glibc's per-thread
 * arenas and mappings V8 does not report as its own, and moved -15 to +54 MiB in the same runs: it is the
 * coarse bound. Leaks of JS objects, buffers or handles fail the heap, buffer and handle checks at far
 * smaller sizes.
 */
const MALLOC_HEAP_BOUND_BYTES = 32 * 1024 * 1024;
const RSS_BOUND_BYTES = 96 * 1024 * 1024;
/** Userland bytes Sluice may queue towards one client that stopped reading (pipe high-water marks + a chunk). */
const BUFFERED_BOUND_BYTES = 1024 * 1024;
const HEADERS_MS = 2000;
/**
 * How long a slowloris client waits for its 408. Node checks header deadlines every second, and in this
 * one process the clients, the proxy and the echo server share an event loop under heavy load, so 408s
 * arrive late (seen: p50 3 s, max 12 s for headersMs 2 s); the latencies are printed.
 */
const SLOWLORIS_WAIT_MS = 20_000;
const OPENING_AT_ONCE = 128; // CONNECTs in flight while ramping up: stays under the listen backlog (511)
const TOKEN = 'tok-soak';
const AUTH = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const MiB = (n: number): string => (n / 1024 / 1024).toFixed(1);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Settles like `p`, or with `fallback` after `ms`; the timer never outlives the race. */
function orAfter<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Each tunnel costs four descriptors in this process (client, Sluice ×2, echo), a slowloris two. */
function plannedTunnels(): { tunnels: number; why: string } {
  const limit = Number(spawnSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isFinite(limit)) return { tunnels: WANTED_TUNNELS, why: 'ulimit -n unlimited' };
  const fit = Math.floor((limit - 256 - SLOWLORIS * 2 - RESET_SLOTS * 8) / 4.5);
  if (fit >= WANTED_TUNNELS) return { tunnels: WANTED_TUNNELS, why: `ulimit -n ${limit}` };
  return { tunnels: Math.max(50, fit), why: `ulimit -n ${limit} fits only ${fit} tunnels at 4 descriptors each (raise it to run ${WANTED_TUNNELS})` };
}

/** A forced GC without --expose-gc on the command line (vitest workers have no global.gc). */
function forcedGc(): (() => void) | null {
  try {
    v8.setFlagsFromString('--expose-gc');
    return vm.runInNewContext('gc') as () => void;
  } catch {
    return null;
  }
}

// Every tunnel carries a deterministic byte stream: byte i of slot s is (i + 7s) mod 256, so the echo
// is checked without keeping what was sent.
const CHUNK = 65_536;
const PATTERN = Buffer.from(Array.from({ length: 256 + CHUNK }, (_, i) => i & 255));
function streamBytes(slot: number, offset: number, length: number): Buffer {
  const start = (offset + slot * 7) & 255;
  return PATTERN.subarray(start, start + Math.min(length, CHUNK));
}
function matchesStream(slot: number, offset: number, chunk: Buffer): boolean {
  for (let at = 0; at < chunk.length; at += CHUNK) {
    const part = chunk.subarray(at, at + CHUNK);
    if (!part.equals(streamBytes(slot, offset + at, part.length))) return false;
  }
  return true;
}

interface Stats {
  opened: number;
  refused: number;
  liveNow: number;
  livePeak: number;
  bytesEchoed: number;
  mismatches: number;
  resets: number;
  slowReaders: number;
  heavyBacklogged: number;
  slowloris408: number;
  slowlorisOther: number;
  /** [ms from the first byte to the 408, ms from the start of the run to the first byte] per slowloris. */
  slowloris408Ms: [number, number][];
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
  maxQueuedToClient: number;
  errors: string[];
}

function newStats(): Stats {
  return {
    opened: 0, refused: 0, liveNow: 0, livePeak: 0, bytesEchoed: 0, mismatches: 0, resets: 0, slowReaders: 0,
    heavyBacklogged: 0, slowloris408: 0, slowlorisOther: 0, slowloris408Ms: [], loopDelayMaxMs: 0, loopDelayP99Ms: 0, maxQueuedToClient: 0, errors: [],
  };
}

/** Runs the whole mix against `port` for `durationMs` and returns once every client has finished. */
async function runMix(port: number, target: string, tunnels: number, durationMs: number, sluice: TestSluice): Promise<Stats> {
  const stats = newStats();
  const note = (message: string): void => {
    if (stats.errors.length < 20) stats.errors.push(message);
  };
  let opening = 0;
  const waiting: (() => void)[] = [];

  async function open(): Promise<net.Socket | null> {
    while (opening >= OPENING_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    opening += 1;
    try {
      const t = await openConnectTunnel(port, target, AUTH, { timeoutMs: 15_000 });
      if (t.status !== 200) {
        stats.refused += 1;
        note(`CONNECT answered ${t.status}: ${t.head.split('\r\n').find((l) => l.startsWith('Proxy-Status')) ?? ''}`);
        t.socket.destroy();
        return null;
      }
      stats.opened += 1;
      stats.liveNow += 1;
      stats.livePeak = Math.max(stats.livePeak, stats.liveNow);
      t.socket.once('close', () => (stats.liveNow -= 1));
      return t.socket;
    } catch (error) {
      stats.refused += 1;
      note((error as Error).message.slice(0, 200));
      return null;
    } finally {
      opening -= 1;
      waiting.shift()?.();
    }
  }

  /** Checks every echoed byte against the slot's stream. */
  function verifyEcho(socket: net.Socket, slot: number): { received: () => number; closed: Promise<void> } {
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      if (!matchesStream(slot, received, chunk)) stats.mismatches += 1;
      received += chunk.length;
      stats.bytesEchoed += chunk.length;
    });
    return { received: () => received, closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) };
  }

  /** Half-closes, then waits for every written byte to come back and the tunnel to close. */
  async function finish(socket: net.Socket, slot: number, written: number, echoed: { received: () => number; closed: Promise<void> }): Promise<void> {
    socket.resume();
    socket.end();
    try {
      await withTimeout(echoed.closed, 30_000, `slot ${slot} close`);
    } catch (error) {
      note((error as Error).message);
      socket.destroy();
      return;
    }
    if (echoed.received() !== written) note(`slot ${slot}: wrote ${written} bytes, got ${echoed.received()} back`);
  }

  async function echoSlot(slot: number, deadline: number): Promise<void> {
    const socket = await open();
    if (socket === null) return;
    const echoed = verifyEcho(socket, slot);
    let written = 0;
    while (Date.now() < deadline && !socket.destroyed) {
      const length = 1024 + ((slot * 131 + written) % 3072);
      socket.write(streamBytes(slot, written, length));
      written += length;
      await sleep(200 + ((slot * 37) % 300));
    }
    await finish(socket, slot, written, echoed);
  }

  /** Stops reading. A heavy one writes until the whole path (kernel buffers and Sluice) is full. */
  async function slowReaderSlot(slot: number, deadline: number, heavy: boolean): Promise<void> {
    const socket = await open();
    if (socket === null) return;
    stats.slowReaders += 1;
    const echoed = verifyEcho(socket, slot);
    socket.pause();
    let written = 0;
    let full = false;
    while (Date.now() < deadline && !socket.destroyed) {
      if (heavy && !full) {
        let ok = true;
        while (ok && written < 64 * 1024 * 1024) {
          ok = socket.write(streamBytes(slot, written, CHUNK));
          written += CHUNK;
        }
        const drained = await orAfter(new Promise<boolean>((r) => socket.once('drain', () => r(true))), 1000, false);
        if (!drained) {
          full = true;
          stats.heavyBacklogged += 1;
        }
        continue;
      }
      if (!heavy) {
        socket.write(streamBytes(slot, written, 4096));
        written += 4096;
      }
      await sleep(250);
    }
    await finish(socket, slot, written, echoed);
  }

  async function resetSlot(slot: number, deadline: number): Promise<void> {
    for (let round = 0; Date.now() < deadline; round += 1) {
      const socket = await open();
      if (socket === null) return;
      socket.on('data', () => undefined);
      const until = Math.min(deadline, Date.now() + 500 + ((slot * 97 + round * 389) % 2500));
      let written = 0;
      while (Date.now() < until && !socket.destroyed) {
        socket.write(streamBytes(slot, written, 2048));
        written += 2048;
        await sleep(150);
      }
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.resetAndDestroy();
      stats.resets += 1;
      await closed;
    }
  }

  /** Drips a CONNECT head a byte at a time; Sluice must answer 408 after timeouts.headersMs. */
  async function slowlorisSlot(slot: number, deadline: number): Promise<void> {
    const head = `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Bearer ${TOKEN}\r\nX-Slow: ${'s'.repeat(64)}\r\n\r\n`;
    while (Date.now() < deadline) {
      const socket = net.connect({ port, host: '127.0.0.1' });
      let data = Buffer.alloc(0);
      let error = '';
      socket.on('data', (c: Buffer) => (data = Buffer.concat([data, c])));
      socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      const connected = await orAfter(Promise.race([new Promise<boolean>((r) => socket.once('connect', () => r(true))), closed.then(() => false)]), 10_000, false);
      const t0 = Date.now();
      let sent = 0;
      const drip = setInterval(() => {
        if (sent < head.length - 4 && !socket.destroyed) socket.write(head[sent++] ?? '');
      }, 300 + (slot % 5) * 50);
      // headersMs, plus Node's 1 s checking interval, plus scheduling slack under load.
      const ending = connected ? await orAfter(closed.then(() => 'closed'), SLOWLORIS_WAIT_MS, 'timeout') : 'no connect';
      clearInterval(drip);
      socket.destroy();
      if (parseResponseHead(data)?.status === 408 && data.includes('details="request_timeout"')) {
        stats.slowloris408 += 1;
        stats.slowloris408Ms.push([Date.now() - t0, t0 - started]);
      } else {
        stats.slowlorisOther += 1;
        note(`slowloris ${slot}: ${ending} after ${Date.now() - t0} ms, ${sent} bytes sent, error ${error || 'none'}: ${JSON.stringify(data.toString('latin1').slice(0, 120))}`);
      }
    }
  }

  const started = Date.now();
  const deadline = started + durationMs;
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  const sampler = setInterval(() => {
    for (const l of sluice.app.listeners) for (const s of l.sockets) stats.maxQueuedToClient = Math.max(stats.maxQueuedToClient, s.writableLength);
  }, 250);
  const slots: Promise<void>[] = [];
  for (let slot = 0; slot < tunnels; slot += 1) {
    // 70 % echo, 30 % slow readers, of which every 50th slot is heavy.
    slots.push(slot % 10 < 7 ? echoSlot(slot, deadline) : slowReaderSlot(slot, deadline, slot % 50 === 9));
  }
  for (let i = 0; i < RESET_SLOTS; i += 1) slots.push(resetSlot(tunnels + i, deadline));
  await sleep(500); // slowloris heads start once the ramp-up is under way
  for (let i = 0; i < SLOWLORIS; i += 1) slots.push(slowlorisSlot(i, deadline));
  try {
    await withTimeout(Promise.all(slots), durationMs + 90_000, 'every soak client finished');
  } finally {
    clearInterval(sampler);
    loopDelay.disable();
  }
  stats.loopDelayMaxMs = Math.round(loopDelay.max / 1e6);
  stats.loopDelayP99Ms = Math.round(loopDelay.percentile(99) / 1e6);
  return stats;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/**
 * `native` is RSS outside the V8 heap's resident pages. V8 sizes its young generation to the load and
 * keeps it after a forced GC (Node 24 reserved 128 MiB for it after the soak), which is V8's choice,
 * not something the soak leaked; live heap growth is asserted on `heapUsed`.
 */
function memory(): { rss: number; native: number; mallocHeap: number; heapResident: number; heapUsed: number; external: number; arrayBuffers: number } {
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
  const heapResident = v8.getHeapStatistics().total_physical_size;
  return { rss, native: rss - heapResident, mallocHeap: mallocHeapResident(), heapResident, heapUsed, external, arrayBuffers };
}

/** Resident bytes of glibc's main heap (the `[heap]` mapping), where most of a Node process's C++ objects live. */
function mallocHeapResident(): number {
  const smaps = readFileSync('/proc/self/smaps', 'utf8');
  const at = smaps.indexOf(' [heap]\n');
  if (at < 0) return 0;
  const rss = /\nRss:\s+(\d+) kB/.exec(smaps.slice(at));
  return rss === null ? 0 : Number(rss[1]) * 1024;
}

describe('soak: 1,000 concurrent tunnels', () => {
  let echo: EchoServer;
  let sluice: TestSluice;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    sluice = await startSluice(
      {
        timeouts: { headersMs: HEADERS_MS },
        grants: [{ id: 'soak', tokenSha256: tokenHash(TOKEN), destinations: [`https://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  it(`holds ${WANTED_TUNNELS} tunnels for ${SOAK_MS} ms and gives back sockets, handles, timers and memory`, async () => {
    const plan = plannedTunnels();
    if (plan.tunnels < WANTED_TUNNELS) console.log(`[soak] scaled down to ${plan.tunnels} tunnels: ${plan.why}`);
    const gc = forcedGc();
    const target = `echo.test:${echo.port}`;
    const settle = async (label: string): Promise<void> => {
      await waitUntil(() => liveClientSockets(sluice) === 0, { timeoutMs: 20_000, label });
      sluice.records.length = 0; // the test's in-memory audit copy is not Sluice's memory
      for (let i = 0; i < 3; i += 1) {
        gc?.();
        await sleep(100);
      }
    };

    const cold = memory();
    const coldResources: ResourceCounts = resourceCounts();
    // The baseline is taken once the warm-up has held the whole mix at once: on a loaded machine 3 s may
    // not open every tunnel, and a baseline below the working size counted the allocator's arenas
    // reaching it as soak growth (Node 24 in CI: warm 255 MiB, after 349; alone: warm 336, after 340).
    for (let round = 1; ; round += 1) {
      const warm = await runMix(sluice.port, target, plan.tunnels, WARMUP_MS, sluice);
      expect(warm.errors, 'warm-up errors').toEqual([]);
      await settle('warm-up drained');
      if (warm.livePeak >= plan.tunnels || round === 3) break;
    }
    const baseline = memory();
    const baselineResources: ResourceCounts = resourceCounts();

    const started = Date.now();
    const stats = await runMix(sluice.port, target, plan.tunnels, SOAK_MS, sluice);
    const ranMs = Date.now() - started;
    await waitUntil(() => liveClientSockets(sluice) === 0, { timeoutMs: 20_000, label: 'Sluice holds no client socket' });
    const closes = sluice.closes();
    const granted = sluice.decisions().filter((d) => d.reason === 'granted').length;
    const closedBy: Record<string, number> = {};
    for (const c of closes) closedBy[c.closedBy] = (closedBy[c.closedBy] ?? 0) + 1;
    let excess: string[] = [];
    for (let i = 0; i < 50; i += 1) {
      excess = resourceExcess(baselineResources);
      if (excess.length === 0) break;
      await sleep(100);
    }
    await settle('soak drained');
    const after = memory();
    const afterResources = resourceCounts();

    console.log(
      `[soak] ${ranMs} ms (+${WARMUP_MS} ms warm-up), long-lived tunnels ${plan.tunnels} (${plan.why}) + ${RESET_SLOTS} resetting + ${SLOWLORIS} slowloris; ` +
        `peak concurrent tunnels ${stats.livePeak}, opened ${stats.opened}, refused ${stats.refused}, echoed ${MiB(stats.bytesEchoed)} MiB, mismatches ${stats.mismatches}, ` +
        `resets ${stats.resets}, slow readers ${stats.slowReaders} (heavy backlogged ${stats.heavyBacklogged}), max queued by Sluice to one client ${stats.maxQueuedToClient} B, ` +
        `slowloris 408 ${stats.slowloris408}/other ${stats.slowlorisOther} (408 after p50 ${percentile(stats.slowloris408Ms.map((x) => x[0]), 50)} ms, max ${percentile(stats.slowloris408Ms.map((x) => x[0]), 100)} ms; slowest started at ${JSON.stringify([...stats.slowloris408Ms].sort((a, b) => b[0] - a[0]).slice(0, 3).map((x) => x[1]))} ms), event-loop delay p99 ${stats.loopDelayP99Ms} ms max ${stats.loopDelayMaxMs} ms, close records ${closes.length}/${granted} ${JSON.stringify(closedBy)}; ` +
        `RSS cold ${MiB(cold.rss)} → warm ${MiB(baseline.rss)} → after ${MiB(after.rss)} MiB, of it outside the V8 heap ${MiB(cold.native)} → ${MiB(baseline.native)} → ${MiB(after.native)} MiB (Δ vs warm ${MiB(after.native - baseline.native)}, bound ${MiB(RSS_BOUND_BYTES)}; Δ vs cold ${MiB(after.native - cold.native)}; glibc [heap] ${MiB(cold.mallocHeap)} → ${MiB(baseline.mallocHeap)} → ${MiB(after.mallocHeap)}, bound Δ ${MiB(MALLOC_HEAP_BOUND_BYTES)}), ` +
        `V8 heap resident ${MiB(cold.heapResident)} → ${MiB(baseline.heapResident)} → ${MiB(after.heapResident)} MiB, used ${MiB(baseline.heapUsed)} → ${MiB(after.heapUsed)} MiB, arrayBuffers ${MiB(baseline.arrayBuffers)} → ${MiB(after.arrayBuffers)} MiB, gc ${gc === null ? 'unavailable' : 'forced'}; ` +
        `resources cold ${JSON.stringify(coldResources)} warm ${JSON.stringify(baselineResources)} after ${JSON.stringify(afterResources)}`,
    );

    expect(stats.errors, 'unexpected soak errors').toEqual([]);
    expect(stats.refused).toBe(0);
    expect(stats.mismatches).toBe(0);
    expect(stats.livePeak, 'concurrent tunnels').toBeGreaterThanOrEqual(plan.tunnels);
    expect(stats.resets).toBeGreaterThan(0);
    expect(stats.heavyBacklogged, 'heavy slow readers filled the path').toBeGreaterThan(0);
    expect(stats.slowloris408).toBeGreaterThan(0);
    expect(stats.maxQueuedToClient, 'Sluice buffered a stalled reader’s bytes instead of pushing back').toBeLessThan(BUFFERED_BOUND_BYTES);
    expect(closes.length, 'one close record per tunnel').toBe(granted);
    expect(excess, 'active handles and timers back at the baseline').toEqual([]);
    expect(resourceExcess(coldResources), 'and at the cold baseline').toEqual([]);
    expect(after.heapUsed - baseline.heapUsed, 'V8 heap growth').toBeLessThan(16 * 1024 * 1024);
    expect(after.arrayBuffers - baseline.arrayBuffers, 'Buffer memory growth').toBeLessThan(16 * 1024 * 1024);
    expect(after.mallocHeap - baseline.mallocHeap, 'growth of glibc’s main heap after the soak').toBeLessThan(MALLOC_HEAP_BOUND_BYTES);
    expect(after.native - baseline.native, 'RSS growth outside the V8 heap after the soak').toBeLessThan(RSS_BOUND_BYTES);
  }, SOAK_MS + WARMUP_MS + 240_000);
});
