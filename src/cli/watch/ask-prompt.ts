// `sluice watch --ask`: one prompt at a time on the terminal for the asks the stream raises, the answer
// posted to POST /v1/asks/{id}. Asks that arrive meanwhile wait in order; one answered elsewhere (another
// supervisor, the timeout, a revoke) leaves the queue, or closes its open prompt. Never answers by itself.
import readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { printable } from './event-line.js';

/** What a pending ask shows: from an `ask` event's data, or from GET /v1/asks. */
export interface PendingAsk {
  readonly ask: string;
  readonly grant: string;
  readonly destination: string;
}

export interface AskAnswer {
  readonly decision: 'allow' | 'deny';
  readonly scope: 'once' | 'grant';
}

/** The keys of the prompt; `s` (skip) leaves the ask pending, to be answered elsewhere or to time out. */
export const ANSWER_KEYS: Readonly<Record<string, AskAnswer>> = {
  o: { decision: 'allow', scope: 'once' },
  g: { decision: 'allow', scope: 'grant' },
  d: { decision: 'deny', scope: 'once' },
  D: { decision: 'deny', scope: 'grant' },
};
const SKIP_KEY = 's';

/** POSTs one answer; resolves with the admin API's status and body, rejects when it cannot be reached. */
export type PostAnswer = (ask: string, answer: AskAnswer) => Promise<{ readonly status: number; readonly body: unknown }>;

export interface AskPromptOptions {
  readonly input: Readable;
  /** Where the prompt and the outcomes go (stderr, so that stdout stays one line per event). */
  readonly output: Writable;
  /** Input and output are a terminal: line editing, and event lines printed above an open prompt. */
  readonly isTerminal: boolean;
  readonly postAnswer: PostAnswer;
  /** Ctrl-C at the prompt, or the end of input: the person has left. */
  readonly onQuit: () => void;
}

/** How many ask ids are remembered to drop repeats (a re-listed or replayed ask); the oldest go first. */
const MAX_REMEMBERED_ASKS = 10_000;

export class AskPrompter {
  private readonly rl: readline.Interface;
  private readonly queue: PendingAsk[] = [];
  private current: PendingAsk | null = null;
  private isPosting = false;
  private isClosed = false;
  /** Every ask offered or seen answered, so that none is prompted twice. */
  private readonly seen = new Set<string>();
  /** Settles when the answer being posted has been reported (tests and shutdown wait on it). */
  private posting: Promise<void> = Promise.resolve();

  constructor(private readonly options: AskPromptOptions) {
    this.rl = readline.createInterface({ input: options.input, output: options.output, terminal: options.isTerminal });
    this.rl.on('line', (line) => this.onLine(line));
    // In a terminal readline owns Ctrl-C (raw mode): without this listener it would only close itself.
    this.rl.on('SIGINT', () => options.onQuit());
    this.rl.on('close', () => {
      if (!this.isClosed) options.onQuit();
    });
  }

  /** Queues an ask not seen before; prompts at once when no prompt is open. */
  offer(ask: PendingAsk): void {
    if (this.isClosed || this.seen.has(ask.ask)) return;
    this.remember(ask.ask);
    this.queue.push(ask);
    this.next();
  }

  /** The ask was answered (by anyone; `how` says how): drop it from the queue, or close its open prompt. */
  answered(askId: string, how: string): void {
    this.remember(askId);
    const queued = this.queue.findIndex((a) => a.ask === askId);
    if (queued !== -1) this.queue.splice(queued, 1);
    if (this.current?.ask === askId) {
      this.current = null;
      this.clearPromptLine();
      this.say(`ask ${askId}: ${how}`);
      this.next();
    }
  }

  /** Writes `text` (an event line, on another stream) without breaking the open prompt. */
  printAbove(write: () => void): void {
    if (!this.options.isTerminal || this.current === null) {
      write();
      return;
    }
    this.clearPromptLine();
    write();
    this.rl.prompt(true);
  }

  /** The number of asks waiting behind the open prompt. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Waits for the answer being posted, then stops prompting and gives the terminal back. */
  async close(): Promise<void> {
    this.isClosed = true;
    await this.posting;
    if (this.current !== null) this.clearPromptLine();
    this.current = null;
    this.queue.length = 0;
    this.rl.close();
  }

  private remember(askId: string): void {
    this.seen.add(askId);
    if (this.seen.size > MAX_REMEMBERED_ASKS) {
      const oldest = this.seen.values().next();
      if (oldest.done !== true) this.seen.delete(oldest.value);
    }
  }

  private next(): void {
    if (this.isClosed || this.current !== null || this.isPosting) return;
    const ask = this.queue.shift();
    if (ask === undefined) return;
    this.current = ask;
    this.rl.setPrompt(printable(`allow ${ask.destination} for grant ${ask.grant}? [o]nce / [g]rant / [d]eny once / [D]eny for grant / [s]kip: `));
    this.rl.prompt();
  }

  private onLine(line: string): void {
    const ask = this.current;
    if (ask === null || this.isClosed) return;
    const key = line.trim();
    if (key === SKIP_KEY) {
      this.current = null;
      this.say(`ask ${ask.ask}: skipped (still pending)`);
      this.next();
      return;
    }
    const answer = ANSWER_KEYS[key];
    if (answer === undefined) {
      this.say('answer o, g, d, D or s');
      this.rl.prompt();
      return;
    }
    this.current = null;
    this.isPosting = true;
    this.posting = this.post(ask, answer).finally(() => {
      this.isPosting = false;
      this.next();
    });
  }

  private async post(ask: PendingAsk, answer: AskAnswer): Promise<void> {
    const what = `${answer.decision} ${answer.scope === 'once' ? 'once' : 'for the grant'}`;
    try {
      const reply = await this.options.postAnswer(ask.ask, answer);
      if (reply.status >= 200 && reply.status < 300) this.say(`ask ${ask.ask}: answered, ${what}`);
      else if (reply.status === 409) this.say(`ask ${ask.ask}: already answered`);
      else if (reply.status === 404) this.say(`ask ${ask.ask}: gone`);
      else this.say(`ask ${ask.ask}: not answered: ${reply.status} ${errorCode(reply.body)}`);
    } catch (error) {
      this.say(`ask ${ask.ask}: not answered: ${(error as Error).message}`);
    }
  }

  /** One line on the prompt's stream; what the stream or the admin API sent never reaches the terminal raw. */
  private say(line: string): void {
    this.options.output.write(`${printable(line)}\n`);
  }

  private clearPromptLine(): void {
    if (!this.options.isTerminal) return;
    readline.cursorTo(this.options.output, 0);
    readline.clearScreenDown(this.options.output);
  }
}

function errorCode(body: unknown): string {
  const error = typeof body === 'object' && body !== null ? (body as { error?: unknown }).error : undefined;
  return typeof error === 'string' ? error : 'error';
}
