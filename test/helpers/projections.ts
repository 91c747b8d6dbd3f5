import type { Platform } from './platform.js';

/**
 * Waits until every projector has applied the whole journal (`GET /admin/v1/runtime/projections?wait=1`):
 * what a test calls before reading a read model (the Conversations API) right after the turns that feed it.
 * Fails the test if they did not catch up within `timeoutMs`.
 */
export async function waitForProjections(p: Pick<Platform, 'edge' | 'operatorToken'>, timeoutMs = 20_000): Promise<void> {
  const res = await fetch(new URL(`/admin/v1/runtime/projections?wait=1&timeout_ms=${timeoutMs}`, p.edge), {
    headers: { authorization: `Bearer ${p.operatorToken}` },
  });
  const body = (await res.json()) as { caughtUp?: boolean };
  if (res.status !== 200 || body.caughtUp !== true) throw new Error(`projections did not catch up: ${res.status} ${JSON.stringify(body)}`);
}
