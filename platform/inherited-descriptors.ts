import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * What a child process would inherit of ours. Node opens its own descriptors close-on-exec, but native code
 * need not: LMDB opens the store's files without it, so every program the platform starts (a function sandbox
 * process, `espeak-ng`, `pocketsphinx`) would hold read-write handles on `store.mdb` and `read-models.mdb`.
 * Node cannot set close-on-exec on a descriptor, so the program is started through bash, which closes them
 * first (`withoutInherited`).
 */

/** Linux's `O_CLOEXEC` in the `flags` of /proc/<pid>/fdinfo (octal). */
const O_CLOEXEC = 0o2000000;

/**
 * This process's descriptors that a child would inherit (open without close-on-exec), besides stdio: LMDB's,
 * and any the platform's own parent left open. Read at each call: every thread's store files share the process's
 * table. Empty where /proc cannot be read.
 */
export function inheritedDescriptors(): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!(fd > 2)) continue;
    try {
      const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
      if (flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0) out.push(fd);
    } catch {
      // Closed meanwhile (the directory's own descriptor among them).
    }
  }
  return out;
}

/** bash, which can close descriptors above 9 by number (dash cannot); every Debian system has it. */
const BASH = ['/bin/bash', '/usr/bin/bash'].find((p) => existsSync(p)) ?? null;

/** Whether `withoutInherited` can close what a child would inherit here. */
export const canCloseInherited = (): boolean => BASH !== null;

/**
 * `command` and `args` to spawn so that the program holds none of our descriptors but its stdio: through bash,
 * which closes the inherited ones and `exec`s the program (keeping bash's pid, uid and stdio). As given where
 * nothing would be inherited, or without bash.
 */
export function withoutInherited(command: string, args: string[]): { command: string; args: string[] } {
  const fds = inheritedDescriptors();
  if (fds.length === 0 || !BASH) return { command, args };
  return { command: BASH, args: ['-c', `exec ${fds.map((fd) => `${fd}<&-`).join(' ')}; exec "$0" "$@"`, command, ...args] };
}
