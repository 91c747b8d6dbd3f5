import type { Collection, Doc, Store } from '../../store/mod.js';
import type { AlertRuleContext, RuleDefinition, RuleState } from '../../machines/alert-rule.js';

/** The actor kind of an alert rule: one actor per rule, its id the rule's. */
export const ALERT_RULE_KIND = 'alert-rule';

/** A rule id (contract 2.3). */
export const RULE_ID = /^ar_[A-Za-z0-9]+$/;

/** Alert rules per account (contract 8). */
export const MAX_RULES_PER_ACCOUNT = 10;

/** An alert rule as the API shows it (contract 2.3). */
export interface AlertRuleView extends RuleDefinition {
  id: string;
  current_state: RuleState;
  created_at: string;
  updated_at: string;
  since: string | null;
  last_evaluated_at: string | null;
  current_value: number | null;
}

/**
 * An alert rule as stored (`alert_rules`): the read model of the rule's actor, written from its snapshots
 * (`snapshot_version` keeps an older one from overwriting a newer). The create route inserts it first, at
 * version 0, taking a free `slot`: the per-account limit holds across edges because a second create that
 * picks a taken slot is refused by the unique index.
 */
export interface AlertRuleRecord extends Doc, AlertRuleView {
  account_id: string;
  slot: number;
  snapshot_version: number;
}

/** The `alert_rules` collection. */
export function alertRules(store: Store): Collection<AlertRuleRecord> {
  return store.collection<AlertRuleRecord>({
    name: 'alert_rules',
    indexes: [{ fields: ['account_id', 'slot'], unique: true }, { fields: ['account_id', 'created_at'] }],
  });
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The API view of a rule actor's context (null before `CREATE`). */
export function ruleViewOf(c: AlertRuleContext): AlertRuleView | null {
  if (!c.rule || c.createdAt === null) return null;
  return {
    id: c.id,
    ...c.rule,
    current_state: c.state,
    created_at: iso(c.createdAt)!,
    updated_at: iso(c.updatedAt ?? c.createdAt)!,
    since: iso(c.since),
    last_evaluated_at: iso(c.lastEvaluatedAt),
    current_value: c.currentValue,
  };
}

/** The API view of a stored rule. */
export function ruleView(r: AlertRuleRecord): AlertRuleView {
  return {
    id: r.id,
    name: r.name,
    project_id: r.project_id,
    metric: r.metric,
    operator: r.operator,
    threshold_value: r.threshold_value,
    window_duration: r.window_duration,
    enabled: r.enabled,
    current_state: r.current_state,
    created_at: r.created_at,
    updated_at: r.updated_at,
    since: r.since,
    last_evaluated_at: r.last_evaluated_at,
    current_value: r.current_value,
  };
}
