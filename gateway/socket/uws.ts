import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export type Uws = typeof import('@trufflesuite/uws-js-unofficial');

const require = createRequire(import.meta.url);

/**
 * Loads the native uWebSockets.js binary. The package's own entry point silently falls back to a `ws`-based
 * shim when the binary does not load; this loads the binary by path instead and throws if it cannot, so the
 * gateway never runs on the shim unnoticed.
 */
export function loadNativeUws(): { uws: Uws; binary: string } {
  const pkgDir = dirname(require.resolve('@trufflesuite/uws-js-unofficial/package.json'));
  const binary = join(pkgDir, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`);
  try {
    return { uws: require(binary) as Uws, binary };
  } catch (err) {
    throw new Error(`uWebSockets.js native binary did not load (${binary}): ${(err as Error).message}`);
  }
}
