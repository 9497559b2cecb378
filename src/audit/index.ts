// The audit module: the AuditRecordV1 shapes and the JSON-lines sink.
export * from './record.js';
export * from './sink.js';
export * from './format-record.js';
export * from './timestamp.js';
