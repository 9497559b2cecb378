// The audit module: the AuditRecordV1 shapes, the facts a hop's records are written from, and the JSON-lines sink.
export * from './record.js';
export * from './sink.js';
export * from './format-record.js';
export * from './encode-record.js';
export * from './timestamp.js';
