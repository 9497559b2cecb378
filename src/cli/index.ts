// The cli module: clients of the running proxy's admin API (`sluice grant`, `sluice watch`) and `sluice run`.
export * from './grant.js';
export * from './watch/watch.js';
export * from './run.js';
export * from './run-grant.js';
export * from './running-configs.js';
export * from './sandbox-plan.js';
export * from './seccomp-filter.js';
export * from './caller-tree.js';
export * from './descriptors.js';
export * from './open-tree.js';
export * from './tree-scan.js';
export * from './sluice-files.js';
export * from './paths.js';
