/** What `eventually` keeps polling on. */
type Falsy = undefined | null | false | 0 | '';

/**
 * Polls `check` every `everyMs` until it returns a truthy value, and returns that value. Once `timeoutMs` has
 * passed it throws, naming `what`: a test that waited in vain says for what, and never goes on with a value
 * it did not wait for. The one polling helper of the tests.
 */
export async function eventually<T>(check: () => Promise<T | Falsy>, timeoutMs = 20_000, what = 'a condition', everyMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Whether `output` (a process's output so far) shows `line` within `timeoutMs`. A platform's JSON log lines
 * go through pino's default destination, which writes asynchronously: a line can reach the pipe after what it
 * reports (a response, a BYE, a refusal) reached the test, so a test that checks one after an outcome waits for it.
 */
export function logged(output: () => string, line: RegExp | string, timeoutMs = 5000): Promise<boolean> {
  const found = () => (typeof line === 'string' ? output().includes(line) : line.test(output()));
  return eventually(async () => found(), timeoutMs, `the log line ${line}`).then(
    () => true,
    () => false,
  );
}
