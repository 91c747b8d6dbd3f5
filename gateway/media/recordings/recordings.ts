import type { BlobStore } from '../../../store/blobs/mod.js';
import type { JournalStore } from '../../../store/mod.js';
import type { Codec } from '../rtp/codec.js';
import type { RtpSession } from '../rtp/session.js';
import { CallRecorder } from './recorder.js';
import { completeIfOrphaned, recordingCompletedEntry, recordingStartedEntry, type RecordingMeta } from '../../../actors/recording/mod.js';

export interface RecordingsOptions {
  /** Days a recording is kept after its call started (RECORDING_RETENTION_DAYS); 0 records nothing. */
  retentionDays: number;
  /** A project's own retention (its `recording_retention_days` setting), when it has one. */
  projectRetentionDays?: (projectId: string) => Promise<number | undefined>;
  /** How much audio one durable chunk holds (RECORDING_CHUNK_MS): what a crash can lose at most. */
  chunkMs: number;
  log: (level: 'info' | 'warn', msg: string, extra?: Record<string, unknown>) => void;
  /**
   * Where a complete recording is said to be so (`recording.completed`, a non-actor entry): what the
   * recordings projector waits for before it renders the redacted audio. Absent: nothing is journaled.
   */
  journal?: Pick<JournalStore, 'append' | 'ofActor'>;
}

/** What a call's recording tap needs to know of the call. */
export interface RecordedCall {
  conversationId: string;
  callSid: string;
  accountId: string;
  projectId: string;
}

const DAY = 86_400_000;

/**
 * The media gateway's recordings: `tap` is the one hook in a call (gateway/media/server.ts `callOf`): it
 * records the caller's frames and digits as the RTP session receives them (in order, with their times and
 * RTP timestamps), and the agent's frames as it sends them. `sweep` deletes recordings past their retention and
 * completes those a gateway that died left incomplete.
 */
export class Recordings {
  private sweeper: NodeJS.Timeout | null = null;
  constructor(readonly blobs: BlobStore, private readonly o: RecordingsOptions) {}

  tap(p: RecordedCall, codec: Codec, rtp: RtpSession): { end(at: number): Promise<void> } | null {
    const now = Date.now();
    const own = this.o.projectRetentionDays?.(p.projectId).catch(() => undefined) ?? Promise.resolve(undefined);
    // The project's setting, else the deployment's; 0 records nothing (what was buffered meanwhile is dropped).
    const expires = own.then((d) => {
      const days = d ?? this.o.retentionDays;
      return days > 0 ? now + days * DAY : null;
    });
    const ids = { conversation_id: p.conversationId, account_id: p.accountId, project_id: p.projectId, call_sid: p.callSid, started_at: now };
    const rec = new CallRecorder(this.blobs, ids, expires, this.o.chunkMs, (msg, extra) => this.o.log('warn', msg, extra));
    // Journaled once the meta is written: the conversation's row says the call has audio from then on.
    const journaled = rec.started.then(async (meta) => {
      if (!meta || !this.o.journal) return;
      const { conversation_id, account_id, project_id, call_sid, started_at, expires_at } = meta;
      await this.o.journal.append(recordingStartedEntry({ conversation_id, account_id, project_id, call_sid, started_at, expires_at }));
    }).catch((err) => this.o.log('warn', 'could not journal a started recording', { conversation_id: p.conversationId, err: String(err) }));
    const received = rtp.onReceived;
    rtp.onReceived = (pcm, timestamp) => {
      rec.callerFrame(pcm, Date.now(), timestamp);
      received?.(pcm, timestamp);
    };
    const digit = rtp.onDigitReceived;
    rtp.onDigitReceived = (d, timestamp) => {
      rec.digit(d, Date.now(), timestamp);
      digit?.(d, timestamp);
    };
    const sent = rtp.onSent;
    rtp.onSent = (payload, answer) => {
      rec.sent(codec, payload, Date.now(), answer);
      sent?.(payload, answer);
    };
    return {
      end: async (at) => {
        // The start's entry first: the completion is never journaled before it.
        await journaled;
        if (!(await rec.end(at)) || !this.o.journal) return;
        await this.o.journal
          .append(recordingCompletedEntry({ conversation_id: p.conversationId, account_id: p.accountId, project_id: p.projectId, call_sid: p.callSid, ended_at: at }))
          .catch((err) => this.o.log('warn', 'could not journal a complete recording', { conversation_id: p.conversationId, err: String(err) }));
      },
    };
  }

  /**
   * One pass over every recording's meta, started hourly by `startSweeping` on every media gateway: deletes the
   * recordings whose retention is over, and completes those that a gateway which died left incomplete long after
   * their conversations ended (`completeIfOrphaned`; the ids it completed).
   */
  async sweep(now = Date.now()): Promise<{ removed: number; completed: string[] }> {
    let removed = 0;
    const completed: string[] = [];
    for (const name of await this.blobs.list('rec')) {
      if (!name.endsWith('/meta')) continue;
      const raw = await this.blobs.read(name);
      const meta = raw ? (JSON.parse(raw.toString()) as RecordingMeta) : null;
      if (!meta) continue;
      if (meta.expires_at <= now) {
        await this.blobs.remove(name.slice(0, -'/meta'.length));
        removed++;
      } else if (this.o.journal && (await completeIfOrphaned(this.blobs, this.o.journal, meta, now))) {
        this.o.log('info', 'completed a recording its gateway left incomplete', { conversation_id: meta.conversation_id });
        completed.push(meta.conversation_id);
      }
    }
    return { removed, completed };
  }

  startSweeping(everyMs = 3_600_000): void {
    const run = () => void this.sweep().catch((err) => this.o.log('warn', 'recording sweep failed', { err: String(err) }));
    run();
    this.sweeper = setInterval(run, everyMs);
    this.sweeper.unref();
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
  }
}
