// The audit sink: JSON lines through pino to stdout, stderr or a file, written asynchronously so
// logging never blocks the event loop; flush() on shutdown.
import pino from 'pino';
import type { AuditRecordV1 } from './record.js';

export interface AuditSink {
  write(record: AuditRecordV1): void;
  flush(): Promise<void>;
}

const FLUSH_EVERY_MS = 200;

export function createPinoSink(file: string): AuditSink {
  const dest = file === 'stdout' ? 1 : file === 'stderr' ? 2 : file;
  // pino's asynchronous destination (SonicBoom) without a logger in front: the record already has its
  // fixed field set and timestamp, so it is serialized once and appended as one line.
  // Records are batched into writes of at least 4 KiB (one write per record cost more CPU than the
  // whole decision: see bench/results/*-profile.md), and flushed at least every FLUSH_EVERY_MS.
  const stream = pino.destination({ dest, sync: false, mkdir: true, minLength: 4096 });
  const timer = setInterval(() => stream.flush(), FLUSH_EVERY_MS);
  timer.unref();
  return {
    write(record) {
      stream.write(`${JSON.stringify(record)}\n`);
    },
    flush() {
      clearInterval(timer);
      return new Promise((resolve) => {
        stream.flush((error) => {
          void error;
          resolve();
        });
      });
    },
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
