/**
 * The Chat API load every chat benchmark drives: `connections` keep-alive connections, each playing conversations
 * of `turns` turns (a create, then respond after respond on that conversation, then a new one), as chat users
 * come and go. Rates count every turn.
 */
import autocannon from 'autocannon';
import type { ChatProject } from '../test/helpers/chat.js';

export interface ChatLoad {
  connections: number;
  turns: number;
  /** Seconds. */
  duration: number;
}

/** Runs the load against `edge` (the edge's base URL) as the project's chat client. */
export function chatLoad(edge: string, c: ChatProject, load: ChatLoad): Promise<autocannon.Result> {
  const base = `/v1/${c.accountId}/${c.agentId}/chat`;
  return autocannon({
    url: edge,
    connections: load.connections,
    duration: load.duration,
    headers: { 'content-type': 'application/json', 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token },
    requests: [
      {
        method: 'POST',
        path: `${base}/create`,
        body: '{}',
        onResponse: (_status: number, body: string, context: Record<string, unknown>) => {
          context.id = JSON.parse(body).conversation_id;
        },
      },
      ...Array.from({ length: load.turns - 1 }, () => ({
        method: 'POST' as const,
        path: `${base}/respond`,
        setupRequest: (req: Record<string, unknown>, context: Record<string, unknown>) => ({
          ...req,
          body: JSON.stringify({ conversation_id: context.id, message: 'When do you open on Monday?' }),
        }),
      })),
    ],
  } as autocannon.Options);
}
