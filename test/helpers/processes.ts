import { readFileSync, readdirSync } from 'node:fs';

/**
 * The fields of a /proc `stat` file from the third on (state, parent, ...): what follows the command name, which
 * may hold spaces and parentheses, so the split starts after its last ')'. Field n is at index n - 3.
 */
export function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Every process's parent, read from /proc. */
function parents(): Map<number, number> {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      parentOf.set(Number(name), Number(statFields(`/proc/${name}/stat`)[4 - 3]));
    } catch {
      // gone
    }
  }
  return parentOf;
}

/**
 * The node processes below `root` that run the function sandbox's child script (bwrap and unshare put processes
 * of their own in between). Never returns a pid below 2, so a caller that signals them cannot hit a process group.
 */
export function sandboxNodes(root: number): number[] {
  const parentOf = parents();
  const below = (pid: number): boolean => {
    for (let p = parentOf.get(pid); p !== undefined && p > 1; p = parentOf.get(p)) if (p === root) return true;
    return false;
  };
  return [...parentOf.keys()].filter((pid) => {
    if (pid < 2 || !below(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'node' && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('actors/functions/child.js');
    } catch {
      return false;
    }
  });
}
