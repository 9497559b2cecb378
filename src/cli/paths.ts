// The path questions sluice run's plan asks everywhere: is one path at or below another, what stands
// at a path without following a last symlink, and where a path really leads. One copy of each.
import fs from 'node:fs';
import path from 'node:path';

/** `child` is `parent` or lies below it (whole components: /a/bc is not within /a/b). */
export function isWithin(child: string, parent: string): boolean {
  return parent === '/' || child === parent || child.startsWith(`${parent}/`);
}

/** What stands at `p`, a symlink itself rather than its target; null when nothing does. */
export function lstatOrNull(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

/** Where `p` leads with every symlink resolved, or `p` made absolute when it does not exist. */
export function realOrSelf(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
