import { readFileSync, readdirSync } from 'node:fs';

/** Every process's parent, read from /proc. */
function parents(): Map<number, number> {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
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
