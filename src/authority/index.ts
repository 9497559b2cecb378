// The authority module: canonical destinations, destination rules, and authorize(). Pure.
export * from './canonical-host.js';
export * from './canonical-destination.js';
export * from './destination-rule.js';
export * from './authority-set.js';
