// The config module: schema, defaults and loadConfig; modules receive only their own section type.
export * from './schema.js';
export * from './defaults.js';
export * from './load.js';
export * from './listen-address.js';
export * from './writable-path.js';
export * from './passed-expiry.js';
