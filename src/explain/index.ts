// The explain module: `sluice explain`, a hop's policy stages and its decision for a grant and a target,
// without connecting. A module of its own so that loading it (and proxy/) is only ever `sluice explain`'s cost.
export * from './explain.js';
export * from './closest-rule.js';
export * from './grant-source.js';
