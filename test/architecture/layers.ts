// The layer of each module under src/ (a folder, or a single file at src/'s root such as app.ts), one
// table for the tests that need it: layers.test.ts enforces imports against it, and
// architecture-doc.test.ts checks the module table of docs/architecture.md against it.

export const LAYERS: Readonly<Record<string, number>> = {
  core: 0,
  // Owns the yaml package only: config/ parses with it, and sluice run reads config paths without config/.
  'yaml-text': 0,
  config: 1,
  identity: 2,
  authority: 2,
  ledger: 2,
  resolve: 2,
  route: 2,
  egress: 2,
  relay: 2,
  audit: 2,
  telemetry: 2,
  listen: 2,
  grant: 3,
  admin: 3,
  proxy: 4,
  app: 5,
  cli: 5,
  explain: 5,
  main: 6,
  // The first process inside a `sluice run` sandbox: a process shell of its own, like main.ts.
  'sandbox-init': 6,
};

/**
 * The rooms of a module that outgrew a dozen files (docs/architecture.md, rule 5), lowest first: a room
 * imports its own files and the rooms before it in this list, never one after it. Files at the module's
 * root are its face (index.ts) and import rooms; no room imports them.
 */
export const ROOMS: Readonly<Record<string, readonly string[]>> = {
  proxy: ['hop', 'tunnel', 'ingress'],
};
