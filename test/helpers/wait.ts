/** Polls `f` every 200 ms until it gives something truthy, and gives that; throws after `ms`. */
export async function waitFor<T>(f: () => Promise<T | null | undefined>, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 200));
  }
}
