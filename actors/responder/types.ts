/**
 * The responder: what the agent says. Two implementations behind one interface: the offline default
 * (`offline.ts`: greeting from behavior, retrieval over knowledge-base topics, out-of-domain fallback,
 * handoff on request, end on goodbye) and an OpenAI-compatible chat-completions client (`openai.ts`).
 */

/** A knowledge-base topic as deployed. */
export interface KnowledgeTopic {
  name: string;
  content: string;
}

/** One earlier message of the conversation. */
export interface HistoryMessage {
  role: 'user' | 'agent';
  text: string;
}

/** A project function the LLM may call as a tool (hooks `start`, `turn`, `end` are never offered). */
export interface ToolFunction {
  name: string;
  /** Calls the function in the sandbox with the model's JSON arguments; resolves with its result as text. */
  call: (args: unknown) => Promise<string>;
}

export interface ResponderContext {
  /** The deployed behavior (system prompt and rules). */
  behavior: string;
  topics: KnowledgeTopic[];
  /** Real-time config variables, read at this turn. Offline responder options live here too (see offline.ts). */
  variables: Record<string, unknown>;
  history: HistoryMessage[];
  tools: ToolFunction[];
  /**
   * The conversation's channel label (`CHAT`, `WEBCHAT`, `SMS`, `WHATSAPP`, `API`, `VOICE-SIP`), when known:
   * the offline responder words its goodbye and handoff for a phone call or a chat.
   */
  channel?: string;
  /** Language of the conversation (BCP 47), when known. */
  language?: string;
  /** Streaming: called with each piece of text as it is produced (the offline responder calls it once). */
  onChunk?: (text: string) => void;
}

export interface ResponderReply {
  text: string;
  /** The responder could not answer from what it knows. */
  isOod: boolean;
  intents: string[];
  entities: Record<string, string>;
  handoff: { destination: string; reason: string } | null;
  /** The conversation should end after this reply. */
  end: boolean;
}

export interface Responder {
  readonly name: string;
  /** The opening reply of a conversation. */
  greet(ctx: ResponderContext): Promise<ResponderReply>;
  /** The reply to a user message. */
  respond(ctx: ResponderContext, message: string): Promise<ResponderReply>;
}
