import type { SnapshotFrom } from 'xstate';
import { callMachine, callStatus, type CallContext, type CallSettings, type DialOutput, type FailureCode, type SlotWaitInput } from '../../machines/call.js';
import type { Store } from '../../store/mod.js';
import { telephony } from '../../builder/telephony.js';
import type { ActorKind } from '../kinds.js';
import { decode, encode } from '../protocol.js';
import { fromTask } from '../task.js';
import { sleepUntil } from '../timers.js';
import { TransportError, type Transport } from '../transport/types.js';
import { CALL_KIND, MEDIA_DIAL_SUBJECT, type CallEncryption, type DialRequest, type DialResult } from './protocol.js';
import { outboundCallRecords, type OutboundCallRecord } from './record.js';
import { TrunkMissingError, TrunkSlots } from './slots.js';

/** What the call kind runs with. `transport` resolves once the runtime (built after its kinds) is up. */
export interface CallDeps {
  store: Store;
  transport: () => Promise<Transport>;
  /** Calls a trunk carries at once unless its telephony connector says otherwise. */
  trunkConcurrency: number;
  queueTimeoutMs: number;
  ringTimeoutMs: number;
  statusRetentionMs: number;
  /** Told when a trunk's slots cannot be claimed for a while (the store failing): the calls wait on. */
  warn?: (msg: string, err: unknown) => void;
}

/** How long past the ring timeout a media gateway's answer may take (the ACK, choosing media: it does not wait for the opening). */
export const DIAL_GRACE_MS = 30_000;

/** How often a queued or calling call wakes (a durable timer), so a failover resumes it within this. */
export const WAKE_MS = 5000;

/** The status endpoint's `reason` for each failure (contract 2.7: empty unless a failure has a reason). */
const REASONS: Record<FailureCode, string> = {
  queue_timeout: 'queue timeout: no free line on the trunk in time',
  busy: 'busy',
  no_answer: 'no answer',
  rejected: 'rejected',
  unreachable: 'unreachable',
  trunk_unusable: "the trunk cannot be dialled: its host is the media gateway's own SIP address (HOST); put the PBX on another address",
  trunk_missing: 'the telephony connector of this call no longer exists',
  error: 'failed to place the call',
};

/** The `reason` a call shows. */
export function reasonOf(c: Pick<CallContext, 'failure' | 'sipStatus'>): string {
  if (!c.failure) return '';
  return c.sipStatus !== null ? `${REASONS[c.failure]} (SIP ${c.sipStatus})` : REASONS[c.failure];
}

/** What an ask of a call actor answers. */
export interface CallReply {
  found: boolean;
  call_sid: string;
  status: ReturnType<typeof callStatus>;
  reason: string;
}

/**
 * The `call` actor kind: one outbound call per actor, id = call_sid. Its effects claim and free trunk slots
 * (`slots.ts`), ask a media gateway to dial (`MEDIA_DIAL_SUBJECT`) and sleep on durable timers; with each
 * settled snapshot it writes the status record the status endpoint reads.
 */
export function callKind(deps: CallDeps): ActorKind {
  const slots = new TrunkSlots(deps.store, deps.warn);
  const phones = telephony(deps.store);
  const records = outboundCallRecords(deps.store);
  const settings: CallSettings = {
    queueTimeoutMs: deps.queueTimeoutMs,
    ringTimeoutMs: deps.ringTimeoutMs,
    retentionMs: deps.statusRetentionMs,
    dialGraceMs: DIAL_GRACE_MS,
    wakeMs: WAKE_MS,
  };

  const limitOf = async (connectorId: string): Promise<number> => {
    const trunk = await phones.trunk(connectorId);
    if (!trunk) throw new TrunkMissingError(connectorId);
    return trunk.max_concurrent_calls ?? deps.trunkConcurrency;
  };

  const dial = async (input: { callSid: string; request: CallContext['request'] & object; ringTimeoutMs: number }): Promise<DialOutput> => {
    const r = input.request;
    const trunk = await phones.trunk(r.telephony_connector_id);
    if (!trunk) return { outcome: 'error', sipStatus: null, conversationId: null, at: Date.now() };
    const request: DialRequest = {
      call_sid: input.callSid,
      account_id: r.account_id,
      project_id: r.project_id,
      environment: r.environment,
      variant_id: r.variant_id,
      to: r.to,
      from: r.from,
      headers: r.headers,
      encryption: r.encryption as CallEncryption,
      trunk: {
        host: trunk.host,
        port: trunk.port,
        transport: trunk.transport,
        ...(trunk.username !== undefined ? { username: trunk.username } : {}),
        ...(trunk.password !== undefined ? { password: trunk.password } : {}),
        transfer: trunk.transfer,
      },
      ring_timeout_ms: input.ringTimeoutMs,
    };
    const transport = await deps.transport();
    // One request per dial: a media gateway answers once the call is answered or has failed. Retried while
    // no media gateway listens yet (one starting up), as long as the ring timeout would allow.
    const deadline = Date.now() + input.ringTimeoutMs;
    for (;;) {
      try {
        const res = decode<DialResult>(await transport.request(MEDIA_DIAL_SUBJECT, encode(request), input.ringTimeoutMs + DIAL_GRACE_MS));
        return { outcome: res.outcome, sipStatus: res.sip_status, conversationId: res.conversation_id, at: Date.now() };
      } catch (err) {
        if (err instanceof TransportError && err.code === 'NO_RESPONDERS' && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 250));
          continue;
        }
        if (err instanceof TransportError && err.code === 'TIMEOUT') return { outcome: 'no_answer', sipStatus: null, conversationId: null, at: Date.now() };
        return { outcome: 'error', sipStatus: null, conversationId: null, at: Date.now() };
      }
    }
  };

  const machine = callMachine.provide({
    actors: {
      // A snapshot stored before calls passed their placing time here restores without it: such a call was
      // placed before any that has it, so it goes first.
      acquireSlot: fromTask<number, SlotWaitInput>((input) =>
        slots.acquire(input.telephonyConnectorId, input.callSid, input.queuedAt ?? 0, () => limitOf(input.telephonyConnectorId)),
      ),
      releaseSlot: fromTask<void, { callSid: string; telephonyConnectorId: string }>((input) => ({
        done: slots.release(input.telephonyConnectorId, input.callSid),
      })),
      dial: fromTask<DialOutput, { callSid: string; request: NonNullable<CallContext['request']>; ringTimeoutMs: number }>((input) => ({ done: dial(input) })),
      sleepUntil,
    },
  });

  const project = async (s: SnapshotFrom<typeof callMachine>, id: string, version: number): Promise<void> => {
    const c = s.context as CallContext;
    if (!c.request) return;
    const status = callStatus(s) ?? 'expired';
    const record: OutboundCallRecord = {
      id,
      account_id: c.request.account_id,
      project_id: c.request.project_id,
      connector_id: c.request.connector_id,
      telephony_connector_id: c.request.telephony_connector_id,
      status,
      reason: reasonOf(c),
      to_number: c.request.to,
      from_number: c.request.from,
      sip_status: c.sipStatus,
      conversation_id: c.conversationId,
      queued_at: new Date(c.queuedAt!).toISOString(),
      ended_at: c.endedAt !== null ? new Date(c.endedAt).toISOString() : null,
      retain_until: c.endedAt !== null ? c.endedAt + c.settings.retentionMs : null,
      snapshot_version: version,
    };
    await records.putNewer(record, 'snapshot_version');
  };

  return {
    name: CALL_KIND,
    machine,
    input: (id) => ({ id, settings }),
    reply: (s): CallReply => {
      const c = s.context as CallContext;
      const status = callStatus(s);
      return { found: status !== null, call_sid: c.callSid, status, reason: reasonOf(c) };
    },
    project: (s, id, version) => project(s as SnapshotFrom<typeof callMachine>, id, version),
  };
}
