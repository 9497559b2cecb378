// The audit sink: JSON lines to stdout, stderr or a file (mode 0600, narrowed to it when looser), written
// in batches off the event loop (BatchWriter), a hop's records encoded from its facts straight into the
// batch (encode-record.ts); flush() on shutdown. Operational messages use pino on stderr.
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { BatchWriter, DEFAULT_BATCH, type BatchWriterOptions } from './batch-writer.js';
import {
  closeBytesBound,
  decisionBytesBound,
  encodeClose,
  encodeDecision,
  type AuditPlace,
  type CloseOutcome,
  type HopCloseFacts,
  type HopDecisionFacts,
} from './encode-record.js';
import { formatRecord } from './format-record.js';
import type { AuditRecordV1 } from './record.js';

export interface AuditSink {
  write(record: AuditRecordV1): void;
  /**
   * Optional: writes a hop's decision record, decided at `nowMs`, straight from the hop's facts, with no
   * record object. The record is the one `write` would get; a sink without it gets that object instead.
   */
  writeDecision?(hop: HopDecisionFacts, place: AuditPlace, nowMs: number): void;
  /** Optional: writes a hop's close record, closed at `nowMs`, straight from its facts (as writeDecision). */
  writeClose?(hop: HopCloseFacts, place: AuditPlace, outcome: CloseOutcome, nowMs: number): void;
  /** At shutdown: writes every queued record and closes the destination; later records are dropped. */
  flush(): Promise<void>;
  /**
   * Optional: opens the destination again (`file`, or the one in use): after logrotate moved the file, or
   * when a reload names another. Records written before go to the old one. Throws when it cannot be opened,
   * and the sink keeps the destination it has.
   */
  reopen?(file?: string): void;
}

/** What the sink reports besides records: write faults, and a loose audit file it narrowed. */
export interface FileSinkHooks {
  onError(error: NodeJS.ErrnoException): void;
  onWarning(message: string, fields: object): void;
}

/** Only Sluice's user reads or writes the audit log: it is the record operators trust (finding 9). */
export const AUDIT_FILE_MODE = 0o600;
/** Bits that let others forge the log (group- or world-writable) or read it (world-readable). */
const LOOSE_BITS = [
  [0o020, 'group-writable'],
  [0o002, 'world-writable'],
  [0o004, 'world-readable'],
] as const;

function openDestination(file: string, hooks: FileSinkHooks): number {
  if (file === 'stdout') return 1;
  if (file === 'stderr') return 2;
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // The mode applies only when the file is created; an existing one is narrowed below.
  const fd = fs.openSync(file, 'a', AUDIT_FILE_MODE);
  try {
    narrowMode(fd, file, hooks);
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
  return fd;
}

/** A regular file that others may write or read is set to 0600, with a warning; devices and pipes are left alone. */
function narrowMode(fd: number, file: string, hooks: FileSinkHooks): void {
  const stat = fs.fstatSync(fd);
  if (!stat.isFile()) return;
  const mode = stat.mode & 0o777;
  const loose = LOOSE_BITS.filter(([bit]) => (mode & bit) !== 0).map(([, name]) => name);
  if (loose.length === 0) return;
  const was = `0${mode.toString(8)}`;
  fs.fchmodSync(fd, AUDIT_FILE_MODE);
  hooks.onWarning(`audit file ${file} was ${loose.join(', ')} (mode ${was}); set it to 0600`, { file, mode: was });
}

/**
 * Opens the destination now (a bad path fails startup, not the first record). Write errors after that
 * are reported through `hooks.onError`; the proxy keeps serving.
 */
export function createFileSink(file: string, hooks: FileSinkHooks, options: BatchWriterOptions = DEFAULT_BATCH): AuditSink {
  const writer = new BatchWriter(openDestination(file, hooks), options, (error) => hooks.onError(error));
  let current = file;
  return {
    reopen(next = current) {
      writer.replaceDestination(openDestination(next, hooks));
      current = next;
    },
    write(record) {
      writer.append(formatRecord(record));
    },
    writeDecision(hop, place, nowMs) {
      writer.appendEncoded(decisionBytesBound(hop, place), encodeDecision, hop, place, nowMs, undefined);
    },
    writeClose(hop, place, outcome, nowMs) {
      writer.appendEncoded(closeBytesBound(hop, place, outcome), encodeClose, hop, place, outcome, nowMs);
    },
    flush: () => writer.close(),
  };
}

export interface OperationalLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Operational messages (startup, faults) go to stderr, apart from the audit stream: one JSON object a line,
 * `{"level":"info","time":…,"msg":…}` and fields. The level is its name, not pino's number (UX review
 * 2026-12-04 finding 8): an operator greps `"level":"error"`.
 */
export function createOperationalLog(level: string): OperationalLog {
  return pino({ base: null, level, messageKey: 'msg', formatters: { level: (label) => ({ level: label }) } }, pino.destination({ dest: 2, sync: true }));
}
