/**
 * A text that is one long run of a letter, a caller's message or a function's reply, is analyzed on shared paths:
 * the turn's retrieval, the search postings the projection thread writes, and a semantic search's reading of the
 * conversations still in progress. A run of y's made the stemmer recurse once a letter (security audit: a 60,000
 * letter reply overflowed the stack, failing the search with a 500 and the projection cycle, and a caller's 30,000
 * letters got the platform's apology). Through the real platform as a client: the Chat API and the Conversations
 * API over HTTP.
 */
import t from 'tap';
import { chatProject } from './helpers/chat.js';
import { maskingReaders } from './helpers/conversations.js';
import { platformFor } from './helpers/platform.js';

const RUN = 'y'.repeat(30_000);

t.test("a run of y's in a message and a function's reply: answered, projected and searched", async (t) => {
  const p = await platformFor(t);
  // The reply is the run when the caller asks for it; the function's return value may be 64 KiB.
  const c = await chatProject(p, { name: 'Run Co', functions: { turn: `function turn(conv, message) { if (message === 'echo') return ${JSON.stringify(RUN + RUN)}; }` } });
  const { full, range } = await maskingReaders(p, c);

  const id = (await c.chat('create', {})).body.conversation_id as string;
  const caller = await c.chat('respond', { conversation_id: id, message: RUN });
  t.equal(caller.status, 200, 'the caller\'s run answered');
  t.notMatch(caller.body.response, /having trouble|encountered an error/, "with the agent's answer, not the platform's apology");
  const echoed = await c.chat('respond', { conversation_id: id, message: 'echo' });
  t.equal(echoed.status, 200, 'the echo answered');
  t.ok(echoed.body.response === RUN + RUN, "with the function's reply");

  // In progress, the search reads the conversation's turns itself; once closed, its projected document.
  const inProgress = await full({ ...range, query_type: 'semantic', query: 'echo' });
  t.equal(inProgress.status, 200, 'searched in progress');
  t.ok(inProgress.body.conversations.some((x: { id: string }) => x.id === id), 'found in progress');
  t.equal((await c.chat('close', { conversation_id: id })).status, 200);
  let closed;
  for (let i = 0; i < 100; i++) {
    closed = await full({ ...range, query_type: 'semantic', query: 'echo' });
    if (closed.status !== 200 || closed.body.conversations.some((x: { id: string; status?: string }) => x.id === id && x.status !== 'in_progress')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(closed!.status, 200, 'searched once closed');
  t.ok(closed!.body.conversations.some((x: { id: string }) => x.id === id), 'found once projected');
});
