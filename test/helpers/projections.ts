/**
 * Waiting for the projections: after a chat turn (or any committed step), a test that reads a projected read
 * model (the Conversations API, say) first waits until every projector has applied everything committed so
 * far. It asks the platform's admin API, so it works the same embedded and over NATS.
 */
import { http } from './http.js';

/**
 * Waits until every projector's checkpoint has reached the journal's head as it was when called
 * (`GET /admin/v1/runtime/projections?wait=1`); throws when they do not within `timeoutMs`.
 */
export async function waitForProjections(p: { edge: string; operatorToken: string }, timeoutMs = 20_000): Promise<void> {
  const res = await http(p.edge, 'GET', `/admin/v1/runtime/projections?wait=1&timeout_ms=${timeoutMs}`, {
    headers: { authorization: `Bearer ${p.operatorToken}` },
  });
  if (res.status !== 200 || !res.body.caughtUp) throw new Error(`projections did not catch up: ${res.status} ${JSON.stringify(res.body)}`);
}
