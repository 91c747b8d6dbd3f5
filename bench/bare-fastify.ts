/** The Chat benchmark's baseline: a bare Fastify route answering a JSON POST, in its own process. */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/bare', async (req) => ({ conversation_id: (req.body as { conversation_id?: string })?.conversation_id ?? '', response: 'ok', end_conversation: false }));
await app.listen({ host: '127.0.0.1', port: 0 });
process.send?.({ port: (app.server.address() as { port: number }).port });
