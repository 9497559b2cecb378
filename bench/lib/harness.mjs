// What the standalone benches (bench/ask-release.mjs, bench/proxy-auth.mjs) share: every child they start
// is stopped on every way out (a signal, the run's deadline, the end), a shell helper, and a private copy
// of Sluice, so that a rebuild of dist/ by someone else's `npm test` cannot change the binary between
// rounds. `--no-build` copies the dist/ of now, never an earlier run's copy (that would bench stale code).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The run's cleanups, run newest first on SIGINT/SIGTERM (exit 130), past `deadlineMs` (exit 1), or by
 * the caller at its end; each one is bounded to 8 s.
 */
export function exitHarness(deadlineMs) {
  const cleanups = [];
  let cleaning;
  const cleanup = () => {
    cleaning ??= (async () => {
      for (const fn of cleanups.splice(0).reverse()) {
        try {
          await Promise.race([fn(), new Promise((r) => setTimeout(r, 8_000))]);
        } catch {
          // keep cleaning the rest
        }
      }
    })();
    return cleaning;
  };
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.once(sig, () => {
      console.error(`\n${sig}: stopping every child`);
      cleanup().finally(() => process.exit(130));
    });
  }
  const deadline = setTimeout(() => {
    console.error(`the run passed its ${deadlineMs / 1000} s deadline; stopping`);
    cleanup().finally(() => process.exit(1));
  }, deadlineMs);
  deadline.unref();
  return { cleanups, cleanup };
}

export const sh = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000, ...opts }).trim();

export const shOr = (cmd, args, dflt = '') => {
  try {
    return sh(cmd, args);
  } catch {
    return dflt;
  }
};

/** Builds (tsc of src/) or, with `noBuild`, copies dist/ into `buildDir`, with bin/; says which. */
export function privateBuild(root, buildDir, noBuild) {
  fs.rmSync(buildDir, { recursive: true, force: true });
  fs.mkdirSync(buildDir, { recursive: true });
  if (noBuild) {
    if (!fs.existsSync(path.join(root, 'dist', 'main.js'))) throw new Error('--no-build but no dist/main.js: run npm run build');
    fs.cpSync(path.join(root, 'dist'), path.join(buildDir, 'dist'), { recursive: true });
  } else {
    try {
      sh(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json', '--outDir', path.join(buildDir, 'dist')], { cwd: root });
    } catch (err) {
      throw new Error(`tsc failed (someone's work in progress? retry, or use --no-build with a built dist/):\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    }
  }
  fs.cpSync(path.join(root, 'bin'), path.join(buildDir, 'bin'), { recursive: true });
  return noBuild ? 'copy of dist/ (--no-build)' : 'tsc of src/ at start';
}

/**
 * Starts `script --serve-origins` as a child of its own (its own process group, killed by a cleanup), so
 * the client's event loop measures only the client side; resolves with the JSON line it prints first.
 */
export function startOriginsChild(script, cleanups) {
  const originChild = spawn(process.execPath, [script, '--serve-origins'], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
  cleanups.push(async () => {
    try {
      process.kill(-originChild.pid, 'SIGKILL');
    } catch {
      // gone
    }
  });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('origins did not start within 10 s')), 10_000);
    let out = '';
    originChild.stdout.on('data', (c) => {
      out += c;
      if (out.includes('\n')) {
        clearTimeout(t);
        resolve(JSON.parse(out.split('\n')[0]));
      }
    });
    originChild.once('exit', () => reject(new Error('origins exited')));
  });
}
