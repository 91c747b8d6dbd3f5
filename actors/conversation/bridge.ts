import type { ActorClient, AskOptions } from '../client.js';
import type { BridgeData, ConversationEvent } from '../../machines/conversation.js';
import type { ConversationReply } from './kind.js';

/**
 * Tells a conversation that its bridged call ended (contract 4.9): the one way in for both an outside telephony
 * stack (`POST /internal/v1/agentic-dial/bridge-ended`) and the media gateway's own bridged transfers, so the
 * two behave alike. The conversation runs the project's `bridge_ended(conv, bridge)` once and records the
 * completion in its state; a repeat changes nothing and answers the first one's record. Answers the reply;
 * `bridge_ended` is absent from it when the conversation was never started.
 */
export function bridgeEnded(client: ActorClient, conversationId: string, bridge: BridgeData, options: AskOptions = {}): Promise<ConversationReply> {
  const event: ConversationEvent = { type: 'BRIDGE_ENDED', bridge, at: Date.now() };
  return client.ask<ConversationReply>('conversation', conversationId, event, options);
}
