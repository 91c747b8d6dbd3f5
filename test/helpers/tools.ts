import { accessSync, constants } from 'node:fs';

/**
 * Whether a Debian tool is there. Missing: tests may skip locally, but with `CI=true` this throws, so the
 * test fails instead of skipping. The NATS and browser helpers do the same for `nats-server` and Chromium,
 * which also take a path from the environment (`NATS_SERVER`, `CHROMIUM_PATH`).
 */
export function toolAvailable(path: string, pkg: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    if (process.env.CI === 'true') throw new Error(`${path} is not installed (CI=true): apt-get install ${pkg}`);
    return false;
  }
}
