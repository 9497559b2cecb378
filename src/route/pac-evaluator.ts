// Runs one PAC script's FindProxyForURL in its own QuickJS VM (pac-resolver over quickjs-wasi) on its own
// worker thread, limited in memory, stack and time, with every builtin answered on this thread from the
// PacHostPort; PAC code must never reach the network or the host's DNS, never stall this event loop, and
// never fail as anything but a pac_failed verdict.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { deny, ok, type Verdict } from '../core/index.js';
import { PAC_BUILTIN_NAMES, createPacBuiltins, type PacBuiltinName, type PacBuiltins, type PacHostPort } from './pac-builtins.js';
import { PacQueue } from './pac-queue.js';

export type { PacHostPort } from './pac-builtins.js';

export interface PacLimits {
  readonly timeoutMs: number;
  readonly memoryBytes: number;
  readonly stackBytes: number;
  /** Calls one principal may have queued (not counting its call being evaluated); unbounded when absent. */
  readonly maxWaitingPerPrincipal?: number;
}

export const MAX_PAC_SOURCE_CHARS = 2 * 1024 * 1024;
/** Longest raw answer passed on; the answer grammar (pac-answer.ts) bounds it further. */
const MAX_RAW_ANSWER_CHARS = 65_536;
/** Thread start, module imports and VM creation: no PAC code runs in this phase. */
const BOOT_LIMIT_MS = 10_000;
/** Loading also parses and rewrites the source on the host side (esprima, escodegen: ~1 s per MiB). */
const parseAllowanceMs = (source: string): number => 2_000 + Math.ceil(source.length / 512);
/** QuickJS polls its interrupt handler only every ~10k bytecode ticks, so a loop of costly native calls
 * (`while (1) new Array(1e6).join()`) can outlive `timeoutMs`; past this grace the thread is terminated. */
const HARD_GRACE_MS = 250;
/** Calls queued, all principals together; past it, pac_failed. */
const MAX_WAITING_CALLS = 256;
/** Builtins take host names and URLs; a longer string argument throws in the script instead of crossing threads. */
const MAX_BUILTIN_ARG_CHARS = 65_536;

/**
 * quickjs-wasi's MAX_STACK_SIZE (the largest stack its VM accepts). Kept here rather than imported: the
 * package's JS (0.6 MB of heap) is needed only on the sandbox threads, not on the main one for a constant
 * (issue 26 item 2). test/unit/route/pac-evaluator.test.ts checks it against the package.
 */
export const QUICKJS_MAX_STACK_BYTES = 512 * 1024;

const here = createRequire(import.meta.url);
const MODULE_URLS = { qjsUrl: pathToFileURL(here.resolve('quickjs-wasi')).href, pacUrl: pathToFileURL(here.resolve('pac-resolver')).href };
type WasmApi = { compile(bytes: Uint8Array): Promise<object> };
let engine: Promise<object> | null = null;

/** The QuickJS WebAssembly.Module, compiled once per process and posted to every sandbox thread. */
function loadEngine(): Promise<object> {
  engine ??= readFile(here.resolve('quickjs-wasi/quickjs.wasm'))
    .then((bytes) => (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly.compile(bytes))
    .catch((error: unknown) => {
      engine = null;
      throw error;
    });
  return engine;
}

// The sandbox thread (plain JS: it is eval'd, so it runs the same under tsc output and vitest). Each
// builtin is a synchronous stub (so degenerator adds no awaits) that posts {id, name, args} and sleeps on
// a shared counter until this thread answers; the deadline bounds both the guest and those waits.
const WORKER_SOURCE = `'use strict';
const { parentPort, workerData, receiveMessageOnPort } = require('node:worker_threads');
const { rpc, signal, names, source, limits, wasm, qjsUrl, pacUrl } = workerData;
const seq = new Int32Array(signal);
const FATAL = ['interrupted', 'out of memory', 'host call timed out'];
const ARM = -1; // "start the clock when guest code first runs", so host-side parsing is not billed to it
let deadline = 0, nextId = 0;
function timeLeft() {
  if (deadline === ARM) deadline = Date.now() + limits.timeoutMs;
  return deadline - Date.now();
}
function host(name, args) {
  const id = ++nextId;
  if (args.some((a) => typeof a === 'string' && a.length > ${MAX_BUILTIN_ARG_CHARS})) throw new RangeError(name + ': argument too long');
  const safe = args.slice(0, 8).map((a) => (a === null || ['string', 'number', 'boolean'].includes(typeof a) ? a : undefined));
  rpc.postMessage({ id, name, args: safe });
  for (;;) {
    const seen = Atomics.load(seq, 0);
    for (let m = receiveMessageOnPort(rpc); m !== undefined; m = receiveMessageOnPort(rpc)) if (m.message.id === id) return m.message.result;
    const left = timeLeft();
    if (left <= 0) throw new Error('host call timed out');
    Atomics.wait(seq, 0, seen, left);
  }
}
function failure(e) {
  let detail = 'Error: unknown', fatal = true;
  try { detail = (String(e && e.name) + ': ' + String(e && e.message)).slice(0, 200); fatal = FATAL.includes(String(e && e.message)); } catch {}
  try { if (e && typeof e.dispose === 'function') e.dispose(); } catch {}
  return { ok: false, detail, fatal };
}
const quiet = (memory) => ({ fd_write(fd, iovs, count, written) {
  const view = new DataView(memory.buffer);
  let total = 0;
  for (let i = 0; i < count; i++) total += view.getUint32(iovs + i * 8 + 4, true);
  view.setUint32(written, total, true);
  return 0;
} });
(async () => {
  const [{ QuickJS }, pac] = await Promise.all([import(qjsUrl), import(pacUrl)]);
  const missing = Object.keys(pac.sandbox).filter((k) => !names.includes(k));
  if (missing.length > 0) throw new Error('pac-resolver builtins not overridden: ' + missing.join(', '));
  const vm = await QuickJS.create({ wasm, memoryLimit: limits.memoryBytes, maxStackSize: limits.stackBytes,
    interruptHandler: () => timeLeft() < 0, wasi: quiet });
  const sandbox = {};
  for (const name of names) sandbox[name] = function () { return host(name, Array.prototype.slice.call(arguments)); };
  parentPort.postMessage({ type: 'booted' });
  deadline = ARM;
  let find;
  try { find = pac.createPacResolver(vm, source, { sandbox, filename: 'proxy.pac' }); } catch (e) { deadline = 0; parentPort.postMessage({ type: 'failed', ...failure(e) }); return; }
  deadline = 0;
  parentPort.postMessage({ type: 'ready' });
  parentPort.on('message', async (call) => {
    deadline = Date.now() + call.timeoutMs;
    let reply;
    try {
      const value = await find(call.url, call.host);
      reply = typeof value !== 'string' ? { ok: false, detail: 'FindProxyForURL returned ' + (value === null ? 'null' : typeof value) + ', not a string', fatal: false }
        : value.length > ${MAX_RAW_ANSWER_CHARS} ? { ok: false, detail: 'FindProxyForURL returned over ${MAX_RAW_ANSWER_CHARS} characters', fatal: false } : { ok: true, value };
    } catch (e) { reply = failure(e); }
    deadline = 0;
    parentPort.postMessage({ type: 'answer', ...reply });
  });
})().catch((e) => parentPort.postMessage({ type: 'failed', ...failure(e), fatal: true }));
`;

type Reply = { readonly type: 'booted' | 'ready' | 'answer' | 'failed'; readonly ok?: boolean; readonly value?: unknown; readonly detail?: unknown; readonly fatal?: boolean };
type HostCall = { readonly id: number; readonly name: string; readonly args: unknown[] };

/** Runs one builtin for the sandbox; a fault here must not become an uncaught exception on this thread. */
function answerHostCall(builtins: PacBuiltins, call: HostCall): unknown {
  try {
    const fn = (PAC_BUILTIN_NAMES as readonly string[]).includes(call.name) ? builtins[call.name as PacBuiltinName] : undefined;
    const result = fn?.(...(Array.isArray(call.args) ? call.args : []));
    return result === undefined || result === null || ['string', 'number', 'boolean'].includes(typeof result) ? result : null;
  } catch {
    return null;
  }
}

/** One worker thread holding one VM; replies are awaited one at a time, each under a hard limit. */
class SandboxThread {
  private readonly worker: Worker;
  private readonly rpc: MessagePort;
  private readonly inbox: Reply[] = [];
  private waiter: ((reply: Reply) => void) | null = null;
  dead = false;

  constructor(wasm: object, source: string, builtins: PacBuiltins, limits: PacLimits) {
    const signal = new SharedArrayBuffer(4);
    const seq = new Int32Array(signal);
    const { port1, port2 } = new MessageChannel();
    this.rpc = port1;
    port1.on('message', (call: HostCall) => {
      port1.postMessage({ id: call.id, result: answerHostCall(builtins, call) });
      Atomics.add(seq, 0, 1);
      Atomics.notify(seq, 0);
    });
    port1.unref();
    const workerData = { rpc: port2, signal, names: [...PAC_BUILTIN_NAMES], source, limits, wasm, ...MODULE_URLS };
    const heapMb = 128 + 2 * Math.ceil(limits.memoryBytes / 1_048_576);
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true, workerData, transferList: [port2], stdout: true, stderr: true,
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16 },
    });
    this.worker.stdout.resume();
    this.worker.stderr.resume();
    this.worker.on('message', (reply: Reply) => this.deliver(reply));
    this.worker.on('error', (error) => this.kill(`the PAC sandbox failed: ${error.message}`));
    this.worker.on('exit', () => this.kill('the PAC sandbox exited'));
    this.worker.unref();
  }

  send(message: unknown): void {
    if (!this.dead) this.worker.postMessage(message);
  }

  /** The next reply; after `limitMs` without one, the thread is terminated and the reply is a fatal failure. */
  next(limitMs: number): Promise<Reply> {
    const queued = this.inbox.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.dead) return Promise.resolve({ type: 'failed', ok: false, detail: 'the PAC sandbox is gone', fatal: true });
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.kill(`no answer within ${limitMs} ms`), limitMs);
      this.waiter = (reply) => {
        clearTimeout(timer);
        this.waiter = null;
        resolve(reply);
      };
    });
  }

  kill(detail: string): void {
    if (this.dead) return;
    this.dead = true;
    this.worker.terminate().catch(() => undefined);
    this.rpc.close();
    this.waiter?.({ type: 'failed', ok: false, detail, fatal: true });
  }

  private deliver(reply: Reply): void {
    if (this.dead) return;
    if (this.waiter !== null) this.waiter(reply);
    else this.inbox.push(reply);
  }
}

/** The failure text, which may quote the script's own error message: control characters are masked for logs. */
function detailOf(reply: Reply): string {
  const detail = typeof reply.detail === 'string' ? reply.detail : `unexpected ${reply.type} message`;
  return detail.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
}

async function startThread(wasm: object, source: string, builtins: PacBuiltins, limits: PacLimits): Promise<Verdict<SandboxThread>> {
  let thread: SandboxThread;
  try {
    thread = new SandboxThread(wasm, source, builtins, limits);
  } catch (error) {
    return deny('pac_failed', `cannot start the PAC sandbox: ${(error as Error).message}`);
  }
  const booted = await thread.next(BOOT_LIMIT_MS);
  const compiled = booted.type === 'booted' ? await thread.next(limits.timeoutMs + HARD_GRACE_MS + parseAllowanceMs(source)) : booted;
  if (compiled.type === 'ready') return ok(thread);
  thread.kill('not started');
  return deny('pac_failed', `the PAC script did not load: ${detailOf(compiled)}`);
}

function checkLimits({ timeoutMs, memoryBytes, stackBytes }: PacLimits): string | null {
  const fine = Number.isFinite(timeoutMs) && timeoutMs > 0 && Number.isInteger(memoryBytes) && memoryBytes >= 262_144 && Number.isInteger(stackBytes) && stackBytes >= 16_384;
  return fine ? null : `PAC limits need timeoutMs > 0, memoryBytes ≥ 256 KiB and stackBytes ≥ 16 KiB (got ${timeoutMs}, ${memoryBytes}, ${stackBytes})`;
}

/** One queued FindProxyForURL call. */
interface PacCall {
  readonly url: string;
  readonly host: string;
  readonly settle: (answer: Verdict<string>) => void;
}

export class PacScript {
  private thread: Promise<Verdict<SandboxThread>> | null = null;
  // One VM evaluates one call at a time; the others wait in per-principal lines served in turn, so one
  // principal's flood neither fills the queue for everyone nor delays another principal's call by more
  // than one of its own (review 2026-12 finding 15).
  private readonly queue: PacQueue<PacCall>;
  private isEvaluating = false;
  private disposed = false;

  private constructor(private readonly source: string, private readonly builtins: PacBuiltins, private readonly limits: PacLimits, private readonly wasm: object) {
    this.queue = new PacQueue(MAX_WAITING_CALLS, limits.maxWaitingPerPrincipal ?? MAX_WAITING_CALLS);
  }

  /** Loads the script in a fresh sandbox; pac_failed on a syntax error, a missing FindProxyForURL, or top-level code that fails. */
  static async compile(source: string, port: PacHostPort, limits: PacLimits): Promise<Verdict<PacScript>> {
    if (typeof source !== 'string' || source.trim() === '') return deny('pac_failed', 'the PAC script is empty');
    if (source.length > MAX_PAC_SOURCE_CHARS) return deny('pac_failed', `the PAC script is longer than ${MAX_PAC_SOURCE_CHARS} characters`);
    const invalid = checkLimits(limits);
    if (invalid !== null) return deny('pac_failed', invalid);
    const wasm = await loadEngine().catch((error: unknown) => new Error(`cannot load the QuickJS engine: ${String(error)}`));
    if (wasm instanceof Error) return deny('pac_failed', wasm.message);
    const clamped = { ...limits, stackBytes: Math.min(limits.stackBytes, QUICKJS_MAX_STACK_BYTES) };
    const script = new PacScript(source, createPacBuiltins(port), clamped, wasm);
    const started = await script.spawn();
    return started.ok ? ok(script) : started;
  }

  /**
   * The raw answer of FindProxyForURL(url, host). Calls run one at a time: one principal's in order,
   * different principals' in turn. A principal with maxWaitingPerPrincipal calls queued is refused
   * pac_limit_reached; when every principal together has MAX_WAITING_CALLS, pac_failed.
   */
  findProxy(url: string, host: string, principal = ''): Promise<Verdict<string>> {
    if (this.disposed) return Promise.resolve(deny('pac_failed', 'the PAC script was replaced or stopped'));
    return new Promise((settle) => {
      const refused = this.queue.push(principal, { url, host, settle });
      if (refused === 'principal_full') settle(deny('pac_limit_reached', `${this.queue.waitingFor(principal)} PAC evaluations of this grant are waiting`));
      else if (refused === 'all_full') settle(deny('pac_failed', 'too many PAC evaluations are waiting'));
      else this.evaluateNext();
    });
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    void this.thread?.then((t) => t.ok && t.value.kill('disposed'));
    this.thread = null;
  }

  /** Starts the next call in the rota unless one is being evaluated; each settled call starts the next. */
  private evaluateNext(): void {
    if (this.isEvaluating) return;
    const call = this.queue.shift();
    if (call === undefined) return;
    this.isEvaluating = true;
    void this.evaluate(call.url, call.host)
      .catch((error: unknown) => deny<string>('pac_failed', String(error)))
      .then((answer) => {
        this.isEvaluating = false;
        call.settle(answer);
        this.evaluateNext();
      });
  }

  private spawn(): Promise<Verdict<SandboxThread>> {
    this.thread = startThread(this.wasm, this.source, this.builtins, this.limits);
    return this.thread;
  }

  private async evaluate(url: string, host: string): Promise<Verdict<string>> {
    if (this.disposed) return deny('pac_failed', 'the PAC script was replaced or stopped');
    if (typeof url !== 'string' || typeof host !== 'string') return deny('pac_failed', 'FindProxyForURL needs a string url and host');
    let ready = await (this.thread ?? this.spawn());
    if (ready.ok && ready.value.dead) ready = await this.spawn(); // it died while idle
    if (!ready.ok) {
      this.thread = null; // the next call tries again
      return deny('pac_failed', `the PAC sandbox could not be rebuilt: ${ready.detail}`);
    }
    const thread = ready.value;
    thread.send({ url, host, timeoutMs: this.limits.timeoutMs });
    const reply = await thread.next(this.limits.timeoutMs + HARD_GRACE_MS);
    if (reply.type === 'answer' && reply.ok === true && typeof reply.value === 'string') return ok(reply.value);
    if (reply.type !== 'answer' || reply.fatal !== false) {
      // After a timeout, OOM or a dead thread the VM is not trusted again: replace it now, not on the next call.
      thread.kill('replaced after a failure');
      if (!this.disposed) void this.spawn();
    }
    return deny('pac_failed', `FindProxyForURL failed: ${detailOf(reply)}`);
  }
}
