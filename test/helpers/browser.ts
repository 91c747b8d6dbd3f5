import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { DIST } from './platform.js';

/** Debian's Chromium (apt-get install chromium; `.ci/run` installs it). Never a downloaded browser. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Screenshots of the browser tests: `test-artifacts/` at the repository root (gitignored). */
export const ARTIFACTS = join(DIST, '..', 'test-artifacts');

/**
 * Why the browser tests cannot run here, or null when they can. Under CI=true a missing Chromium throws, so
 * the tests fail instead of skipping.
 */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  const why = `Chromium not found at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`;
  if (process.env.CI === 'true') throw new Error(`${why}: required when CI=true`);
  return why;
}

export async function launchChromium(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
  });
}
