/**
 * The LLM responder: an OpenAI-compatible Chat Completions client (`POST {baseUrl}/chat/completions`,
 * streamed over SSE). The system prompt carries the behavior, the knowledge-base topics most relevant to the
 * user's last message and the real-time variables; project functions are offered as tools, with two
 * built-ins: `handoff` and `end_conversation`. Errors reject with a `ResponderError` that says their cause; the
 * caller decides the fallback. No answer (unreachable, an error status, an error the model sent, no response
 * within the timeout) is `respond`; an answer that broke off (the connection lost or the timeout reached while
 * the body is read) or is not valid data (a body or stream event that is not JSON, JSON that is no completion, a
 * stream with no event at all) is `stream`.
 */
import { ResponderError } from './failure.js';
import { rankTopics } from './retrieval.js';
import type { KnowledgeTopic, Responder, ResponderContext, ResponderReply } from './types.js';

export interface OpenAiResponderOptions {
  /** The API base, e.g. `https://api.openai.com/v1` (the client appends `/chat/completions`). */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Per request, including reading the stream (default 30 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** The most topics put into the system prompt. */
export const MAX_PROMPT_TOPICS = 3;
/** The most tool rounds (model asks for tools, results go back) in one reply. */
export const MAX_TOOL_ROUNDS = 5;
/** A request's time limit when `timeoutMs` is not given. */
export const DEFAULT_LLM_TIMEOUT_MS = 30_000;
/** Function hooks that are never tools. */
const HOOKS = new Set(['start', 'turn', 'end', 'external_event', 'bridge_ended']);
const BUILTIN_HANDOFF = 'handoff';
const BUILTIN_END = 'end_conversation';

const GREET_INSTRUCTION =
  'Open the conversation now: greet the user in one or two short sentences, following the behavior above.';

interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

interface RoundResult {
  text: string;
  toolCalls: ToolCall[];
}

/** The topics for the prompt: up to 3 that match the query, else (nothing matches) the first 3 deployed. */
export function promptTopics(topics: readonly KnowledgeTopic[], query: string | undefined): KnowledgeTopic[] {
  const ranked = query ? rankTopics(topics, query).map((r) => r.topic) : [];
  return (ranked.length > 0 ? ranked : topics).slice(0, MAX_PROMPT_TOPICS);
}

/** The system prompt: behavior, then one "Knowledge:" section per topic, then the variables as JSON. */
export function systemPrompt(ctx: ResponderContext, query: string | undefined): string {
  const parts = [ctx.behavior.trim()];
  for (const topic of promptTopics(ctx.topics, query)) parts.push(`Knowledge: ${topic.name}\n${topic.content.trim()}`);
  parts.push(`Real-time variables (JSON):\n${safeJson(ctx.variables)}`);
  if (ctx.language) parts.push(`Reply in the conversation's language: ${ctx.language}.`);
  return parts.filter(Boolean).join('\n\n');
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value ?? {}, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) ?? '{}';
  } catch {
    return '{}';
  }
}

function toolDefinitions(ctx: ResponderContext) {
  const project = ctx.tools
    .filter((t) => !HOOKS.has(t.name) && t.name !== BUILTIN_HANDOFF && t.name !== BUILTIN_END)
    .map((t) => ({
      type: 'function' as const,
      function: {
        name: t.name,
        description: `Project function ${t.name}.`,
        parameters: { type: 'object', additionalProperties: true },
      },
    }));
  return [
    ...project,
    {
      type: 'function' as const,
      function: {
        name: BUILTIN_HANDOFF,
        description: 'Transfer the conversation to a human agent or another destination.',
        parameters: {
          type: 'object',
          properties: {
            destination: { type: 'string', description: 'Where to transfer the conversation.' },
            reason: { type: 'string', description: 'Why the conversation is transferred.' },
          },
          additionalProperties: false,
        },
      },
    },
    {
      type: 'function' as const,
      function: {
        name: BUILTIN_END,
        description: 'End the conversation after your reply.',
        parameters: { type: 'object', properties: {}, additionalProperties: false },
      },
    },
  ];
}

export function createOpenAiResponder(options: OpenAiResponderOptions): Responder {
  // Trailing slashes, matched from the start of their run only (linear, as every pattern here; test/regex.test.ts).
  const endpoint = `${options.baseUrl.replace(/(?<!\/)\/+$/, '')}/chat/completions`;
  const timeoutMs = options.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
  const doFetch = options.fetch ?? fetch;

  async function complete(messages: ChatMessage[], tools: unknown[], onDelta: (text: string) => void): Promise<RoundResult> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream' };
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
    try {
      let res: Response;
      try {
        res = await doFetch(endpoint, {
          method: 'POST',
          headers,
          body: JSON.stringify({ model: options.model, messages, tools, stream: true }),
          signal: controller.signal,
        });
      } catch (err) {
        if (timedOut) throw new ResponderError(`LLM request timed out after ${timeoutMs} ms: POST ${endpoint}`, 'respond');
        throw new ResponderError(`LLM request failed: POST ${endpoint}: ${err instanceof Error ? err.message : String(err)}`, 'respond');
      }
      if (!res.ok) {
        const body = (await res.text().catch(() => '')).slice(0, 500);
        throw new ResponderError(`LLM request failed: POST ${endpoint} answered HTTP ${res.status}${body ? `: ${body}` : ''}`, 'respond');
      }
      // The model answered: from here a failure is its answer breaking off or not being what it should.
      try {
        const type = res.headers.get('content-type') ?? '';
        if (type.includes('application/json')) return fromJson(await res.json(), onDelta);
        return await fromStream(res, onDelta);
      } catch (err) {
        if (timedOut) throw new ResponderError(`LLM answer timed out after ${timeoutMs} ms while it was read: POST ${endpoint}`, 'stream');
        if (err instanceof ResponderError) throw err;
        throw new ResponderError(`LLM answer broke off or is not valid: POST ${endpoint}: ${err instanceof Error ? err.message : String(err)}`, 'stream');
      }
    } finally {
      clearTimeout(timer);
    }
  }

  async function run(ctx: ResponderContext, message: string | undefined): Promise<ResponderReply> {
    const lastUser = message ?? [...ctx.history].reverse().find((m) => m.role === 'user')?.text;
    const messages: ChatMessage[] = [{ role: 'system', content: systemPrompt(ctx, lastUser) }];
    for (const m of ctx.history) {
      messages.push(m.role === 'user' ? { role: 'user', content: m.text } : { role: 'assistant', content: m.text });
    }
    if (message === undefined) messages.push({ role: 'system', content: GREET_INSTRUCTION });
    else messages.push({ role: 'user', content: message });

    const tools = toolDefinitions(ctx);
    const reply: ResponderReply = { text: '', isOod: false, intents: [], entities: {}, handoff: null, end: false };
    // Text streams through onChunk as it comes; between rounds a space separates the texts so that the chunks
    // joined are exactly `reply.text`.
    let needsSeparator = false;
    const onDelta = (piece: string) => {
      if (!piece) return;
      if (needsSeparator) {
        needsSeparator = false;
        if (!/\s$/.test(reply.text) && !/^\s/.test(piece)) {
          reply.text += ' ';
          ctx.onChunk?.(' ');
        }
      }
      reply.text += piece;
      ctx.onChunk?.(piece);
    };

    for (let round = 0; ; round++) {
      const result = await complete(messages, tools, onDelta);
      if (reply.text) needsSeparator = true;
      // Past the last round, further tool calls are ignored (not run) and the text so far is the reply.
      if (result.toolCalls.length === 0 || round >= MAX_TOOL_ROUNDS) break;
      messages.push({ role: 'assistant', content: result.text || null, tool_calls: result.toolCalls });
      for (const call of result.toolCalls) {
        const content = await runTool(ctx, call, reply);
        messages.push({ role: 'tool', tool_call_id: call.id, content });
      }
    }
    return reply;
  }

  return {
    name: 'openai',
    greet: (ctx) => run(ctx, undefined),
    respond: (ctx, message) => run(ctx, message),
  };
}

/** Runs one tool call; the result (or the error, for the model to see) is the tool message's content. */
async function runTool(ctx: ResponderContext, call: ToolCall, reply: ResponderReply): Promise<string> {
  let args: unknown = {};
  const raw = call.function.arguments.trim();
  if (raw) {
    try {
      args = JSON.parse(raw);
    } catch {
      return `Error: the arguments of ${call.function.name} are not valid JSON.`;
    }
  }
  const name = call.function.name;
  const record = (args && typeof args === 'object' ? args : {}) as Record<string, unknown>;
  if (name === BUILTIN_HANDOFF) {
    const destination = typeof record.destination === 'string' && record.destination ? record.destination : 'live_agent';
    const reason = typeof record.reason === 'string' && record.reason ? record.reason : 'model_requested';
    reply.handoff = { destination, reason };
    if (!reply.intents.includes('handoff')) reply.intents.push('handoff');
    return `The conversation will be transferred to ${destination}.`;
  }
  if (name === BUILTIN_END) {
    reply.end = true;
    if (!reply.intents.includes('goodbye')) reply.intents.push('goodbye');
    return 'The conversation will end after your reply.';
  }
  const tool = HOOKS.has(name) ? undefined : ctx.tools.find((t) => t.name === name);
  if (!tool) return `Error: there is no tool named ${name}.`;
  try {
    return await tool.call(args);
  } catch (err) {
    return `Error: ${err instanceof Error ? err.message : String(err)}`;
  }
}

interface PartialCall {
  id: string;
  name: string;
  arguments: string;
}

function collectToolCall(calls: Map<number, PartialCall>, delta: any, fallbackIndex: number) {
  const index = typeof delta?.index === 'number' ? delta.index : fallbackIndex;
  let call = calls.get(index);
  if (!call) {
    call = { id: '', name: '', arguments: '' };
    calls.set(index, call);
  }
  if (typeof delta?.id === 'string' && delta.id) call.id = delta.id;
  if (typeof delta?.function?.name === 'string') call.name += delta.function.name;
  if (typeof delta?.function?.arguments === 'string') call.arguments += delta.function.arguments;
}

function finishToolCalls(calls: Map<number, PartialCall>): ToolCall[] {
  return [...calls.entries()]
    .sort((a, b) => a[0] - b[0])
    .filter(([, c]) => c.name)
    .map(([index, c]) => ({
      id: c.id || `call_${index}`,
      type: 'function' as const,
      function: { name: c.name, arguments: c.arguments },
    }));
}

/** A non-streamed answer (some compatible servers ignore `stream: true`). */
function fromJson(body: any, onDelta: (text: string) => void): RoundResult {
  if (body?.error) throw new ResponderError(`LLM error: ${body.error.message ?? JSON.stringify(body.error)}`, 'respond');
  const message = body?.choices?.[0]?.message;
  if (!message) throw new ResponderError('LLM answer has no choices[0].message', 'stream');
  const text = typeof message.content === 'string' ? message.content : '';
  if (text) onDelta(text);
  const calls = new Map<number, PartialCall>();
  (Array.isArray(message.tool_calls) ? message.tool_calls : []).forEach((c: any, i: number) =>
    collectToolCall(calls, Object.assign({}, c, { index: i }), i),
  );
  return { text, toolCalls: finishToolCalls(calls) };
}

/**
 * Reads an SSE stream of chat.completion.chunk events until `data: [DONE]` (or the end of the body, which some
 * compatible servers send without it). A body with no event at all (not a stream) is not an answer.
 */
async function fromStream(res: Response, onDelta: (text: string) => void): Promise<RoundResult> {
  if (!res.body) throw new ResponderError('LLM answer has no body', 'stream');
  const decoder = new TextDecoder();
  const calls = new Map<number, PartialCall>();
  let text = '';
  let buffer = '';
  let data: string[] = [];
  let done = false;
  let events = 0;

  const dispatch = () => {
    if (data.length === 0) return;
    const payload = data.join('\n');
    data = [];
    events++;
    if (payload.trim() === '[DONE]') {
      done = true;
      return;
    }
    let chunk: any;
    try {
      chunk = JSON.parse(payload);
    } catch {
      throw new ResponderError(`LLM stream has an event that is not JSON: ${payload.slice(0, 200)}`, 'stream');
    }
    if (chunk?.error) throw new ResponderError(`LLM error: ${chunk.error.message ?? JSON.stringify(chunk.error)}`, 'respond');
    const delta = chunk?.choices?.[0]?.delta;
    if (!delta) return;
    if (typeof delta.content === 'string' && delta.content) {
      text += delta.content;
      onDelta(delta.content);
    }
    if (Array.isArray(delta.tool_calls)) delta.tool_calls.forEach((d: any, i: number) => collectToolCall(calls, d, i));
  };

  const reader = res.body.getReader();
  try {
    while (!done) {
      const { value, done: ended } = await reader.read();
      buffer += ended ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while (!done && (newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') dispatch();
        else if (line.startsWith(':')) continue; // comment / keep-alive
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        // other fields (event:, id:, retry:) carry nothing for chat completions
      }
      if (ended) {
        if (buffer.startsWith('data:')) data.push(buffer.slice(5).replace(/^ /, ''));
        buffer = '';
        dispatch();
        break;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  if (events === 0) throw new ResponderError('LLM answer is not an event stream: it has no data event', 'stream');
  return { text, toolCalls: finishToolCalls(calls) };
}
