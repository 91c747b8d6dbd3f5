import type { Collection, Doc, Store } from '../store/mod.js';
import type { TtlLru } from './cache.js';

/** Per-project switches that only the operator changes (operator.md). */
export interface ProjectSettings {
  show_transcripts: boolean;
  chunked_streaming: boolean;
  pii_redaction: boolean;
  /** Days this project's call recordings are kept (docs/recordings.md); absent: RECORDING_RETENTION_DAYS. */
  recording_retention_days?: number;
}

export const DEFAULT_SETTINGS: ProjectSettings = {
  show_transcripts: true,
  chunked_streaming: false,
  pii_redaction: true,
};

interface SettingsRecord extends Doc, Partial<ProjectSettings> {}

/** Project settings, stored sparsely: a project with no record has the defaults. */
export class Settings {
  private readonly records: Collection<SettingsRecord>;

  constructor(
    store: Store,
    /** Settings by project id; null reads the store every time. A `patch` must be followed by an invalidation. */
    private readonly cache: TtlLru<ProjectSettings> | null = null,
  ) {
    this.records = store.collection<SettingsRecord>({ name: 'project_settings' });
  }

  /** A project's settings, through the cache (a project without a record has the defaults, cached too). */
  async get(projectId: string): Promise<ProjectSettings> {
    const read = async () => ({ ...DEFAULT_SETTINGS, ...pick((await this.records.get(projectId)) ?? {}) });
    return (await (this.cache ? this.cache.read(projectId, read) : read()))!;
  }

  /** Sets the given settings; `recording_retention_days: null` removes the project's own retention. */
  async patch(projectId: string, changes: Partial<Omit<ProjectSettings, 'recording_retention_days'>> & { recording_retention_days?: number | null }): Promise<ProjectSettings> {
    const set = pick(changes as Partial<ProjectSettings>);
    const unset = changes.recording_retention_days === null;
    if (Object.keys(set).length === 0 && !unset) return this.get(projectId);
    const update: Record<string, object> = {};
    if (Object.keys(set).length > 0) update.$set = set;
    if (unset) update.$unset = { recording_retention_days: '' };
    const r = await this.records.update({ id: projectId }, update, { upsert: true });
    return { ...DEFAULT_SETTINGS, ...pick(r ?? {}) };
  }
}

function pick(r: Partial<ProjectSettings>): Partial<ProjectSettings> {
  const out: Partial<ProjectSettings> = {};
  for (const k of ['show_transcripts', 'chunked_streaming', 'pii_redaction'] as const) {
    if (typeof r[k] === 'boolean') out[k] = r[k];
  }
  const days = r.recording_retention_days;
  if (typeof days === 'number' && Number.isInteger(days) && days >= 0 && days <= 36_500) out.recording_retention_days = days;
  return out;
}
