// The identity module: Proxy-Authorization parsing, the token store, identify().
export * from './token-store.js';
export * from './identify.js';
