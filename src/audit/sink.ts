// The audit sink: JSON lines to stdout, stderr or a file, written in batches off the event loop
// (BatchWriter); flush() on shutdown. Operational messages use pino on stderr.
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { BatchWriter, DEFAULT_BATCH, type BatchWriterOptions } from './batch-writer.js';
import { formatRecord } from './format-record.js';
import type { AuditRecordV1 } from './record.js';

export interface AuditSink {
  write(record: AuditRecordV1): void;
  /** At shutdown: writes every queued record and closes the destination; later records are dropped. */
  flush(): Promise<void>;
}

function openDestination(file: string): number {
  if (file === 'stdout') return 1;
  if (file === 'stderr') return 2;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return fs.openSync(file, 'a');
}

/**
 * Opens the destination now (a bad path fails startup, not the first record). Write errors after that
 * are reported through `onError`; the proxy keeps serving.
 */
export function createFileSink(file: string, onError: (error: NodeJS.ErrnoException) => void, options: BatchWriterOptions = DEFAULT_BATCH): AuditSink {
  const writer = new BatchWriter(openDestination(file), options, onError);
  return {
    write(record) {
      writer.append(formatRecord(record));
    },
    flush: () => writer.close(),
  };
}

export interface OperationalLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Operational messages (startup, faults) go to stderr, apart from the audit stream. */
export function createOperationalLog(level: string): OperationalLog {
  return pino({ base: null, level, messageKey: 'msg' }, pino.destination({ dest: 2, sync: true }));
}
