import { readdirSync } from 'node:fs';
import { statFields } from '../test/helpers/processes.js';

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on Linux unless told otherwise). */
const CLK_TCK = Number(process.env.CLK_TCK ?? 100);

/**
 * CPU time (user + system) in seconds that process `pid`, or its thread `thread`, has used so far, from its
 * /proc `stat`; with `children`, plus that of its children it has waited for (a `sipp` run under a shell).
 * NaN where it cannot be read (not Linux, the process or thread gone).
 */
export function cpuSeconds(pid: number | undefined, o: { thread?: number; children?: boolean } = {}): number {
  try {
    const f = statFields(o.thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${o.thread}/stat`);
    // utime, stime, cutime and cstime are fields 14 to 17 (field n at index n - 3).
    const ticks = Number(f[14 - 3]) + Number(f[15 - 3]) + (o.children ? Number(f[16 - 3]) + Number(f[17 - 3]) : 0);
    return ticks / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds used so far by each thread of process `pid`, by thread id (threads that ended meanwhile left out). */
export function threadCpuSeconds(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const s = cpuSeconds(pid, { thread: Number(tid) });
    if (!Number.isNaN(s)) out.set(Number(tid), s);
  }
  return out;
}
