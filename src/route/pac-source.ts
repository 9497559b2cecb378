// Where the PAC script comes from: a file or a URL, loaded at start and refreshed every refreshMs. A
// refresh that fails keeps the last good script; with no script at all every PAC hop fails closed.
import { readFile } from 'node:fs/promises';
import { PacScript, type PacHostPort, type PacLimits } from './pac-evaluator.js';

/** Fetches a PAC URL over the direct route (a port wired by app.ts to egress); `ca` is an extra trusted root (PEM). */
export type FetchText = (url: string, timeoutMs: number, ca: string | null) => Promise<string>;

export interface PacSourceOptions {
  readonly file?: string | undefined;
  readonly url?: string | undefined;
  readonly refreshMs?: number | undefined;
  /** route.pac.caFile's PEM: a PAC URL served with a certificate from the enterprise CA is trusted. */
  readonly ca?: string | null | undefined;
  readonly limits: PacLimits;
  readonly host: PacHostPort;
  readonly fetchText: FetchText;
  readonly onError: (message: string) => void;
  readonly onLoad: () => void;
}

export class PacSource {
  private script: PacScript | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastText: string | null = null;
  private loading: Promise<boolean> | null = null;
  lastError: string | null = null;

  constructor(private readonly options: PacSourceOptions) {}

  get current(): PacScript | null {
    return this.script;
  }

  /** Loads once; resolves false (with lastError set) when no usable script could be loaded. Loads never overlap. */
  load(): Promise<boolean> {
    this.loading ??= this.loadOnce().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  private async loadOnce(): Promise<boolean> {
    let text: string;
    try {
      text = this.options.file !== undefined ? await readFile(this.options.file, 'utf8') : await this.options.fetchText(this.options.url ?? '', this.options.limits.timeoutMs * 10, this.options.ca ?? null);
    } catch (error) {
      return this.fail(`cannot load PAC from ${this.options.file ?? this.options.url}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    if (text === this.lastText && this.script !== null) return true;
    const compiled = await PacScript.compile(text, this.options.host, this.options.limits);
    if (!compiled.ok) return this.fail(`PAC script rejected: ${compiled.detail}`);
    const old = this.script;
    this.script = compiled.value;
    this.lastText = text;
    this.lastError = null;
    old?.dispose();
    this.options.onLoad();
    return true;
  }

  start(): void {
    const every = this.options.refreshMs;
    if (every === undefined || this.timer !== null) return;
    this.timer = setInterval(() => void this.load(), every);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.script?.dispose();
    this.script = null;
  }

  private fail(message: string): false {
    this.lastError = message;
    this.options.onError(this.script === null ? message : `${message}; keeping the last good PAC`);
    return false;
  }
}
