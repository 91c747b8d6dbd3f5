import t from 'tap';
import fc from 'fast-check';
import {
  createOfflineResponder,
  createOpenAiResponder,
  createResponder,
  rankTopics,
  analyze,
  STOP_WORDS,
  stem,
  tokenize,
  type ResponderContext,
  type ToolFunction,
} from '../actors/responder/mod.js';
import { ResponderError } from '../actors/responder/failure.js';
import { loadConfig } from '../platform/config.js';
import { startLlmStandin } from './helpers/llm-standin.js';

const TOPICS = [
  { name: 'Opening hours', content: 'We are open from 9am to 5pm, Monday to Friday.' },
  { name: 'Parking', content: 'Free parking is available behind the store.' },
  { name: 'Delivery', content: 'Deliveries arrive within three business days.' },
];

function ctx(over: Partial<ResponderContext> = {}): ResponderContext {
  return { behavior: 'You are the Acme store assistant.', topics: TOPICS, variables: {}, history: [], tools: [], ...over };
}

t.test('text helpers', async (t) => {
  t.test('stems word forms together', async (t) => {
    for (const w of ['opening', 'opens', 'opened', 'open']) t.equal(stem(w), 'open', w);
    t.equal(stem('hours'), 'hour');
    t.equal(stem('parking'), 'park');
    t.equal(stem('deliveries'), stem('delivery'));
    t.equal(stem('42'), '42', 'numbers unchanged');
  });
  t.test('tokenize: lowercase, Unicode, no stop words, stems', async (t) => {
    t.same(tokenize('When do you OPEN? The opening hours, please.'), ['open', 'open', 'hour']);
    t.same(tokenize('Café crème à Zürich 2024'), ['café', 'crème', 'à', 'zürich', '2024']);
    t.same(tokenize('what is it that you do'), [], 'only stop words');
    t.same(tokenize('I’m here, aren’t you?'), [], 'curly apostrophes');
  });
  t.test('property: stem is idempotent', async () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]{1,16}$/), (w) => stem(stem(w)) === stem(w)),
      { numRuns: 2000 },
    );
  });
  t.test("runs of y: a y after a consonant is a vowel, the run alternating from the letter before it", async (t) => {
    // The Porter algorithm's reading of y, as its recursive definition gives it.
    for (const [w, s] of [['syzygy', 'syzygi'], ['yyyy', 'yyyi'], ['sayyy', 'sayyi'], ['yay', 'yai'], ['boyyish', 'boyyish'], ['ayyyying', 'ayyyi'], ['flying', 'fly'], ['daily', 'daili']]) {
      t.equal(stem(w), s, w);
    }
  });
  t.test('a word of a long run of y is analyzed, without overflowing the stack; longer than a word, it is its own term', async (t) => {
    // A function's reply or a caller's message of one letter repeated: the recursion went one frame per y.
    const run = 'y'.repeat(200_000);
    t.same(analyze(run), [{ word: run, term: run }]);
    t.equal(stem(`b${'y'.repeat(63)}`), `b${'y'.repeat(62)}i`, 'a word of 64 letters is stemmed');
    t.equal(stem(`b${'y'.repeat(64)}`), `b${'y'.repeat(64)}`, 'one of 65 is its own term');
  });
  t.test('property: tokenize never returns stop words or empty terms', async () => {
    const stops = [...STOP_WORDS];
    const word = fc.oneof(fc.constantFrom(...stops), fc.stringMatching(/^[a-z]{1,10}$/), fc.string());
    fc.assert(
      fc.property(fc.array(word, { maxLength: 12 }), fc.constantFrom(' ', ', ', '. ', '\n'), (ws, sep) =>
        tokenize(ws.join(sep)).every((term) => term.length > 0 && !STOP_WORDS.has(term)),
      ),
      { numRuns: 1000 },
    );
  });
  t.test('analyze: a word analyzed before gives the same analysis, shared and frozen; past the bound too', async (t) => {
    const [first] = analyze('Deliveries');
    t.same(first, { word: 'deliveries', term: stem('deliveries') });
    t.equal(analyze('more deliveries')[0], first, 'the same entry for the same word (words analyzed before are kept)');
    t.ok(Object.isFrozen(first), 'frozen: a caller cannot change what the next caller gets');
    // More distinct words than the bound: the oldest go, and every analysis stays right.
    const many = Array.from({ length: 25_000 }, (_, i) => `parcel${i.toString(36)}s`);
    t.same(many.filter((w) => analyze(w)[0]?.term !== stem(w)), [], 'each of 25,000 new words analyzed right');
    t.same(analyze('Deliveries'), [{ word: 'deliveries', term: stem('deliveries') }], 'and a word analyzed again after it went');
  });
  t.test('property: analyze equals its words analyzed one by one, the first time and the next', async () => {
    const word = fc.oneof(fc.constantFrom(...STOP_WORDS, "don't", "store's", 'opening', 'Hours'), fc.stringMatching(/^[a-z']{1,12}$/), fc.string());
    fc.assert(
      fc.property(fc.array(word, { maxLength: 10 }), (ws) => {
        const text = ws.join(' ');
        const once = JSON.stringify(analyze(text));
        return once === JSON.stringify(analyze(text)) && once === JSON.stringify(ws.flatMap((w) => analyze(w)));
      }),
      { numRuns: 1000 },
    );
  });
  t.test('property: tokenize is case-insensitive', async () => {
    fc.assert(fc.property(fc.string(), (s) => JSON.stringify(tokenize(s)) === JSON.stringify(tokenize(s.toUpperCase().toLowerCase()))));
  });
  t.test('STOP_WORDS is a real list', async (t) => {
    t.ok(STOP_WORDS.size >= 120);
    for (const w of ['the', 'and', 'you', 'when', 'do', 'what']) t.ok(STOP_WORDS.has(w), w);
  });
  t.test('rankTopics weights the name', async (t) => {
    const topics = [
      { name: 'Returns', content: 'Bring the item back with a receipt; refunds take a week.' },
      { name: 'Refunds', content: 'See returns.' },
    ];
    t.equal(rankTopics(topics, 'refunds')[0].topic.name, 'Refunds');
    t.same(rankTopics(topics, 'weather'), []);
  });
  t.test('rankTopics indexes a frozen topics array once, and any other array afresh', async (t) => {
    const frozen = Object.freeze(TOPICS.map((x) => Object.freeze({ ...x })));
    const plain = TOPICS.map((x) => ({ ...x }));
    for (const query of ['parking', 'when do you open', 'delivery days', 'nothing relevant']) {
      t.same(rankTopics(frozen, query), rankTopics(plain, query), `same ranking: ${query}`);
      t.same(rankTopics(frozen, query), rankTopics(frozen, query), 'and again from the kept index');
    }
    t.equal(rankTopics(plain, 'parking')[0].topic.name, 'Parking');
    plain[1] = { name: 'Weather', content: 'Sunny.' };
    t.same(rankTopics(plain, 'parking'), [], 'a changed (unfrozen) array is ranked as it is now');
    t.equal(rankTopics(plain, 'sunny')[0].topic.name, 'Weather');
  });
});

t.test('offline responder', async (t) => {
  const r = createOfflineResponder();
  t.equal(r.name, 'offline');

  t.test('greeting rules', async (t) => {
    t.equal((await r.greet(ctx({ variables: { greeting: 'Hi there, Acme here.' } }))).text, 'Hi there, Acme here.');
    t.equal((await r.greet(ctx({ behavior: 'Welcome to Acme! You help with orders.' }))).text, 'Welcome to Acme!');
    t.equal((await r.greet(ctx({ behavior: 'Good morning and thanks for calling. Be brief.' }))).text, 'Good morning and thanks for calling.');
    t.equal(
      (await r.greet(ctx({ behavior: 'You help with orders. Greet the caller with "Acme, how may I help?" and be brief.' }))).text,
      'Acme, how may I help?',
    );
    t.equal((await r.greet(ctx({ behavior: 'His job is orders.' }))).text, 'Hello! How can I help you today?', 'His is not Hi');
    const chunks: string[] = [];
    const g = await r.greet(ctx({ onChunk: (c) => chunks.push(c) }));
    t.equal(g.text, 'Hello! How can I help you today?');
    t.same(chunks, [g.text], 'onChunk once with the full text');
    t.same({ ...g, text: '' }, { text: '', isOod: false, intents: [], entities: {}, handoff: null, end: false });
  });

  t.test('answers from topics, across word forms', async (t) => {
    const chunks: string[] = [];
    const a = await r.respond(ctx({ onChunk: (c) => chunks.push(c) }), 'When do you open?');
    t.equal(a.text, TOPICS[0].content);
    t.same(a.intents, ['topic:Opening hours']);
    t.equal(a.isOod, false);
    t.same(chunks, [a.text]);
    t.same((await r.respond(ctx(), 'Where can I park my car?')).intents, ['topic:Parking']);
    t.same((await r.respond(ctx(), 'How long does a delivery take?')).intents, ['topic:Delivery']);
    t.same((await r.respond(ctx(), 'is it available?')).intents, ['topic:Parking'], 'a shared content word answers');
  });

  t.test('out of domain', async (t) => {
    const stops = await r.respond(ctx(), 'What is it that you do?');
    t.equal(stops.isOod, true, 'only stop words');
    const ood = await r.respond(ctx(), 'Who won the football championship?');
    t.equal(ood.isOod, true);
    t.equal(ood.text, "Sorry, I can't help with that. Could you ask me something else?");
    t.same(ood.intents, []);
    const custom = await r.respond(ctx({ variables: { fallback: 'Only store questions, please.' } }), 'Tell me a joke');
    t.equal(custom.text, 'Only store questions, please.');
    t.equal((await r.respond(ctx({ topics: [] }), 'When do you open?')).isOod, true, 'no topics');
    t.equal((await r.respond(ctx({ variables: { min_score: 100 } }), 'When do you open?')).isOod, true, 'min_score');
  });

  t.test('handoff', async (t) => {
    for (const phrase of [
      'Can I speak to a human?',
      'I want to talk to a real person',
      'let me talk with an agent',
      'Connect me to a live agent please',
      'customer service!',
      'I need to speak with someone',
      'put me through to an operator, I want to speak to the operator',
      'I want a representative',
    ]) {
      const h = await r.respond(ctx(), phrase);
      t.same(h.handoff, { destination: 'live_agent', reason: 'user_requested' }, phrase);
      t.same(h.intents, ['handoff'], phrase);
      t.equal(h.end, false);
    }
    t.equal((await r.respond(ctx({ channel: 'VOICE-SIP' }), 'Can I speak to a human?')).text, 'Let me transfer you to someone who can help.');
    t.equal((await r.respond(ctx({ channel: 'WEBCHAT' }), 'Can I speak to a human?')).text, 'Let me connect you with someone who can help.');
    const custom = await r.respond(
      ctx({ variables: { handoff_destination: 'sip:desk@acme.example', handoff_reason: 'escalation' } }),
      'Talk to a person',
    );
    t.same(custom.handoff, { destination: 'sip:desk@acme.example', reason: 'escalation' });
    t.equal((await r.respond(ctx(), 'What do your agents sell?')).handoff, null, 'no request for a person');
  });

  t.test('goodbye', async (t) => {
    for (const phrase of ['Bye', 'ok goodbye!', "That's all, thanks", 'that is all', 'thanks bye', 'See you', 'Good bye.', 'That’s all']) {
      const g = await r.respond(ctx({ channel: 'VOICE-SIP' }), phrase);
      t.equal(g.end, true, phrase);
      t.same(g.intents, ['goodbye'], phrase);
      t.equal(g.text, 'Thank you for calling. Goodbye!');
    }
    t.equal((await r.respond(ctx({ variables: { goodbye: 'Ciao!' } }), 'bye')).text, 'Ciao!');
    for (const phrase of ['Where is the bypass?', 'Can I see your parking?', 'Is that allowed?']) {
      t.equal((await r.respond(ctx(), phrase)).end, false, phrase);
    }
  });

  t.test('entities', async (t) => {
    const e = await r.respond(ctx(), 'Mail bob.smith@example.com or call +1 (555) 123-4567 about order 42');
    t.same(e.entities, { email: 'bob.smith@example.com', phone: '+15551234567', number: '42' });
    t.same((await r.respond(ctx(), 'I need 3 boxes')).entities, { number: '3' });
    t.same((await r.respond(ctx(), 'hello')).entities, {});
    t.same((await r.respond(ctx(), 'bye, reach me at +447911123456')).entities, { phone: '+447911123456' });
  });

  t.test('deterministic', async (t) => {
    const a = await r.respond(ctx(), 'parking deliveries');
    const b = await r.respond(ctx(), 'parking deliveries');
    t.same(a, b);
  });
});

t.test('openai responder against the stand-in', async (t) => {
  t.test('prompt, history, streaming, headers, model', async (t) => {
    const llm = await startLlmStandin([{ text: 'We open at nine in the morning, Monday to Friday.' }]);
    t.teardown(() => llm.close());
    const r = createOpenAiResponder({ baseUrl: llm.url, apiKey: 'sk-test', model: 'test-model' });
    t.equal(r.name, 'openai');
    const chunks: string[] = [];
    const reply = await r.respond(
      ctx({
        variables: { store: 'Main Street' },
        history: [
          { role: 'agent', text: 'Hello!' },
          { role: 'user', text: 'Hi, a question.' },
          { role: 'agent', text: 'Sure, go ahead.' },
        ],
        onChunk: (c) => chunks.push(c),
      }),
      'When do you open?',
    );
    t.equal(reply.text, 'We open at nine in the morning, Monday to Friday.');
    t.ok(chunks.length > 3, 'several chunks');
    t.equal(chunks.join(''), reply.text, 'chunks in order assemble the text');
    t.same({ ...reply, text: '' }, { text: '', isOod: false, intents: [], entities: {}, handoff: null, end: false });

    t.equal(llm.requests.length, 1);
    const body = llm.requests[0];
    t.equal(body.model, 'test-model');
    t.equal(body.stream, true);
    t.equal(llm.headers[0].authorization, 'Bearer sk-test');
    const system = body.messages[0];
    t.equal(system.role, 'system');
    t.match(system.content, 'You are the Acme store assistant.');
    t.match(system.content, 'Knowledge: Opening hours\nWe are open from 9am to 5pm');
    t.notMatch(system.content, 'Free parking', 'irrelevant topics left out');
    t.match(system.content, '"store":"Main Street"');
    t.same(
      body.messages.slice(1).map((m: any) => [m.role, m.content]),
      [
        ['assistant', 'Hello!'],
        ['user', 'Hi, a question.'],
        ['assistant', 'Sure, go ahead.'],
        ['user', 'When do you open?'],
      ],
    );
    const toolNames = body.tools.map((x: any) => x.function.name);
    t.same(toolNames, ['handoff', 'end_conversation']);
  });

  t.test('greet: a system instruction and no user message; no key, no Authorization', async (t) => {
    const llm = await startLlmStandin();
    t.teardown(() => llm.close());
    const r = createOpenAiResponder({ baseUrl: llm.url + '/', model: 'm' });
    const g = await r.greet(ctx());
    t.equal(g.text, 'Hello from the stand-in!');
    const msgs = llm.requests[0].messages;
    t.same(msgs.map((m: any) => m.role), ['system', 'system']);
    t.notOk(msgs.some((m: any) => m.role === 'user'));
    t.equal(llm.headers[0].authorization, undefined);
  });

  t.test('non-streaming answers are accepted too', async (t) => {
    const llm = await startLlmStandin();
    t.teardown(() => llm.close());
    // A fetch that drops `stream: true`, as some compatible servers ignore it.
    const r = createOpenAiResponder({
      baseUrl: llm.url,
      model: 'm',
      fetch: (url, init) => fetch(url, { ...init, body: JSON.stringify({ ...JSON.parse(String(init!.body)), stream: false }) }),
    });
    const chunks: string[] = [];
    const reply = await r.respond(ctx({ onChunk: (c) => chunks.push(c) }), 'ping');
    t.equal(reply.text, 'You said: ping');
    t.same(chunks, ['You said: ping']);
  });

  t.test('SSE parsing: CRLF, comments, other fields, splits inside lines and characters', async (t) => {
    const events = [
      ': keep-alive',
      'event: message',
      'data: ' + JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Grüße ' } }] }),
      '',
      'data: ' + JSON.stringify({ choices: [{ index: 0, delta: { content: 'aus Zürich 🚀' } }] }),
      '',
      'data: ' + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
      '',
      'data: [DONE]',
      '',
      'data: ' + JSON.stringify({ choices: [{ index: 0, delta: { content: 'after done' } }] }),
      '',
    ].join('\r\n');
    const bytes = new TextEncoder().encode(events);
    const fakeFetch: typeof fetch = async () =>
      new Response(
        new ReadableStream({
          start(controller) {
            for (let i = 0; i < bytes.length; i += 7) controller.enqueue(bytes.slice(i, i + 7));
            controller.close();
          },
        }),
        { status: 200, headers: { 'content-type': 'text/event-stream' } },
      );
    const chunks: string[] = [];
    const reply = await createOpenAiResponder({ baseUrl: 'http://unused.invalid/v1', model: 'm', fetch: fakeFetch }).respond(
      ctx({ onChunk: (c) => chunks.push(c) }),
      'hi',
    );
    t.equal(reply.text, 'Grüße aus Zürich 🚀');
    t.same(chunks, ['Grüße ', 'aus Zürich 🚀']);
  });

  t.test('an error event in the stream rejects', async (t) => {
    const fakeFetch: typeof fetch = async () =>
      new Response('data: {"error":{"message":"context length exceeded"}}\n\n', {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      });
    await t.rejects(
      createOpenAiResponder({ baseUrl: 'http://unused.invalid/v1', model: 'm', fetch: fakeFetch }).respond(ctx(), 'hi'),
      /context length exceeded/,
    );
  });

  t.test('project function tool call round trip', async (t) => {
    const llm = await startLlmStandin((body, i) =>
      i === 0
        ? { text: 'Let me check.', toolCalls: [{ id: 'call_abc', name: 'order_status', arguments: { orderId: 'A-17', verbose: true } }] }
        : { text: `Your order is ${body.messages.at(-1).content}.` },
    );
    t.teardown(() => llm.close());
    const calls: unknown[] = [];
    const tools: ToolFunction[] = [
      { name: 'order_status', call: async (args) => (calls.push(args), 'shipped') },
      { name: 'turn', call: async () => 'never' },
    ];
    const chunks: string[] = [];
    const r = createOpenAiResponder({ baseUrl: llm.url, model: 'm' });
    const reply = await r.respond(ctx({ tools, onChunk: (c) => chunks.push(c) }), 'Where is my order A-17?');
    t.same(calls, [{ orderId: 'A-17', verbose: true }], 'arguments assembled from the streamed pieces');
    t.equal(reply.text, 'Let me check. Your order is shipped.');
    t.equal(chunks.join(''), reply.text);
    t.equal(llm.requests.length, 2);
    const first = llm.requests[0];
    const offered = first.tools.map((x: any) => x.function);
    t.same(offered.map((f: any) => f.name), ['order_status', 'handoff', 'end_conversation'], 'hooks are not offered');
    t.same(offered[0].parameters, { type: 'object', additionalProperties: true });
    const second = llm.requests[1].messages;
    t.same(second.at(-2), {
      role: 'assistant',
      content: 'Let me check.',
      tool_calls: [{ id: 'call_abc', type: 'function', function: { name: 'order_status', arguments: '{"orderId":"A-17","verbose":true}' } }],
    });
    t.same(second.at(-1), { role: 'tool', tool_call_id: 'call_abc', content: 'shipped' });
  });

  t.test('parallel tool calls, a failing tool and an unknown one', async (t) => {
    const llm = await startLlmStandin((body, i) =>
      i === 0
        ? {
            toolCalls: [
              { name: 'a', arguments: { n: 1 } },
              { name: 'broken', arguments: {} },
              { name: 'nope', arguments: {} },
            ],
          }
        : { text: body.messages.filter((m: any) => m.role === 'tool').map((m: any) => m.content).join(' | ') },
    );
    t.teardown(() => llm.close());
    const tools: ToolFunction[] = [
      { name: 'a', call: async (args: any) => `a=${args.n}` },
      { name: 'broken', call: async () => { throw new Error('boom'); } },
    ];
    const reply = await createOpenAiResponder({ baseUrl: llm.url, model: 'm' }).respond(ctx({ tools }), 'go');
    t.equal(reply.text, 'a=1 | Error: boom | Error: there is no tool named nope.');
  });

  t.test('built-in handoff and end_conversation', async (t) => {
    const llm = await startLlmStandin((_body, i) =>
      i === 0
        ? {
            toolCalls: [
              { name: 'handoff', arguments: { destination: 'billing', reason: 'refund dispute' } },
              { name: 'end_conversation', arguments: {} },
            ],
          }
        : { text: 'Transferring you to billing now.' },
    );
    t.teardown(() => llm.close());
    const reply = await createOpenAiResponder({ baseUrl: llm.url, model: 'm' }).respond(ctx(), 'I want my money back');
    t.same(reply.handoff, { destination: 'billing', reason: 'refund dispute' });
    t.equal(reply.end, true);
    t.equal(reply.text, 'Transferring you to billing now.');
    t.same(reply.intents, ['handoff', 'goodbye']);
    t.equal(llm.requests[1].messages.filter((m: any) => m.role === 'tool').length, 2);
  });

  t.test('at most 5 tool rounds', async (t) => {
    let runs = 0;
    const llm = await startLlmStandin([{ toolCalls: [{ name: 'loop', arguments: {} }] }]);
    t.teardown(() => llm.close());
    const tools: ToolFunction[] = [{ name: 'loop', call: async () => String(++runs) }];
    const reply = await createOpenAiResponder({ baseUrl: llm.url, model: 'm' }).respond(ctx({ tools }), 'go');
    t.equal(runs, 5);
    t.equal(llm.requests.length, 6);
    t.equal(reply.text, '');
  });

  t.test('HTTP 500 rejects with a clear message', async (t) => {
    const llm = await startLlmStandin([{ status: 500, body: '{"error":{"message":"model overloaded"}}' }]);
    t.teardown(() => llm.close());
    const r = createOpenAiResponder({ baseUrl: llm.url, apiKey: 'sk-secret', model: 'm' });
    await t.rejects(r.respond(ctx(), 'hello'), /HTTP 500.*model overloaded/);
    await r.respond(ctx(), 'hello').catch((err: Error) => t.notMatch(err.message, 'sk-secret', 'no key in the message'));
  });

  t.test('timeout rejects', async (t) => {
    const llm = await startLlmStandin([{ text: 'late', delayMs: 1000 }]);
    t.teardown(() => llm.close());
    const r = createOpenAiResponder({ baseUrl: llm.url, model: 'm', timeoutMs: 100 });
    await t.rejects(r.respond(ctx(), 'hello'), /timed out after 100 ms/);
  });

  t.test('connection refused rejects', async (t) => {
    const llm = await startLlmStandin();
    const url = llm.url;
    await llm.close();
    await t.rejects(createOpenAiResponder({ baseUrl: url, model: 'm' }).respond(ctx(), 'x'), /LLM request failed/);
  });

  t.test("each rejection says its cause, as contract 7.4 tells them apart: no answer, or an answer broken off or invalid", async (t) => {
    /** The cause `respond` rejects with (a ResponderError). */
    const causeOf = (p: Promise<unknown>) => p.then(() => 'answered', (err) => (err instanceof ResponderError ? err.failure : `not a ResponderError: ${err}`));
    const llm = await startLlmStandin((body) => {
      const said = String(body.messages.at(-1).content);
      if (said === 'status') return { status: 500 };
      if (said === 'late') return { text: 'late', delayMs: 1000 };
      if (said === 'break') return { text: 'one two three four', breakAfter: 2 };
      if (said === 'not json') return { raw: { type: 'application/json', body: 'not json' } };
      if (said === 'bad event') return { raw: { type: 'text/event-stream', body: 'data: {"choices":\n\n' } };
      if (said === 'no events') return { raw: { type: 'text/plain', body: 'plain words' } };
      if (said === 'no completion') return { raw: { type: 'application/json', body: '{"choices":[]}' } };
      if (said === 'error event') return { raw: { type: 'text/event-stream', body: 'data: {"error":{"message":"context length exceeded"}}\n\n' } };
      return { text: 'fine' };
    });
    t.teardown(() => llm.close());
    const r = createOpenAiResponder({ baseUrl: llm.url, model: 'm', timeoutMs: 300 });
    const expected: Record<string, string> = {
      fine: 'answered',
      status: 'respond',
      late: 'respond',
      'error event': 'respond',
      break: 'stream',
      'not json': 'stream',
      'bad event': 'stream',
      'no events': 'stream',
      'no completion': 'stream',
    };
    for (const [said, cause] of Object.entries(expected)) t.equal(await causeOf(r.respond(ctx(), said)), cause, said);
    const gone = await startLlmStandin();
    await gone.close();
    t.equal(await causeOf(createOpenAiResponder({ baseUrl: gone.url, model: 'm' }).respond(ctx(), 'x')), 'respond', 'connection refused');
    // The answer began and stopped coming: the timeout cuts a stream interrupted mid-reply.
    const stalled: typeof fetch = async (_url, init) =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(`data: ${JSON.stringify({ choices: [{ delta: { content: 'Hel' } }] })}\n\n`));
            init?.signal?.addEventListener('abort', () => controller.error(new Error('aborted')));
          },
        }),
        { status: 200, headers: { 'content-type': 'text/event-stream' } },
      );
    t.equal(await causeOf(createOpenAiResponder({ baseUrl: 'http://unused.invalid/v1', model: 'm', timeoutMs: 100, fetch: stalled }).respond(ctx(), 'x')), 'stream', 'a stream that stalls mid-reply');
  });

  t.test('createResponder, from the settings platform/config.ts reads', async (t) => {
    t.equal(createResponder(loadConfig({}).llm).name, 'offline');
    t.equal(createResponder(loadConfig({ LLM_BASE_URL: '  ' }).llm).name, 'offline');
    const llm = await startLlmStandin();
    t.teardown(() => llm.close());
    const r = createResponder(loadConfig({ LLM_BASE_URL: llm.url, LLM_API_KEY: 'k1' }).llm);
    t.equal(r.name, 'openai');
    t.equal((await r.respond(ctx(), 'hey')).text, 'You said: hey');
    t.equal(llm.requests[0].model, 'gpt-4o-mini');
    t.equal(llm.headers[0].authorization, 'Bearer k1');
    await createResponder(loadConfig({ LLM_BASE_URL: llm.url, LLM_MODEL: 'other' }).llm).respond(ctx(), 'hey');
    t.equal(llm.requests[1].model, 'other');
  });
});
