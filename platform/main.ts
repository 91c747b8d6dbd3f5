#!/usr/bin/env node
/**
 * The entry: `node dist/platform/main.js [role...]` (docs/limits.md, "Processes"). It listens for SIGTERM and
 * SIGINT first, and only then loads the platform (`start.ts`), which takes seconds on a loaded machine: a stop
 * signal while it loads is a stop while starting (exit 0, as a drain), not the end of the process by the signal.
 * Hence nothing here but the listeners and the import.
 */
import { watchStartSignals } from './start-signals.js';

const startSignals = watchStartSignals();
try {
  const { start } = await import('./start.js');
  await start(startSignals);
} catch (err) {
  process.stderr.write(`switchboard failed to start: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
}
