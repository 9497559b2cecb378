// The yaml-text module: the only importer of the yaml package. Its own module, below config/, so that
// `sluice run` can read the paths out of every running Sluice's config (cli/sluice-files.ts) without
// loading config/'s schema and validator (about 100 ms of a 300 ms start-up budget).
export { parse as parseYaml, parseDocument } from 'yaml';
