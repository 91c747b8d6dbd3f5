import { alertRuleMachine, type AlertRuleContext } from '../../machines/alert-rule.js';
import type { ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { evaluateEffect, notifyEffect, type AlertRuleDeps } from './effects.js';
import { ALERT_RULE_KIND, alertRules, ruleViewOf, type AlertRuleView } from './rules.js';

/** The default time between evaluations (`ALERTS_EVAL_INTERVAL_MS`). */
export const DEFAULT_EVAL_INTERVAL_MS = 60_000;

export interface AlertRuleKindDeps extends AlertRuleDeps {
  intervalMs?: number;
}

/** What an ask of a rule answers: its view, and whose it is (null when deleted or never created). */
export interface AlertRuleReply {
  account_id: string | null;
  deleted: boolean;
  rule: AlertRuleView | null;
}

/**
 * The `alert-rule` actor kind: the rule machine with its `evaluate` (metric buckets) and `notify` (webhook
 * dispatch) effects and durable timers. An ask answers once the evaluation it set off is done (`busy` tag),
 * and the `alert_rules` record is written with the snapshot, so a list right after a PATCH shows it.
 */
export function alertRuleKind(deps: AlertRuleKindDeps): ActorKind {
  const intervalMs = deps.intervalMs ?? DEFAULT_EVAL_INTERVAL_MS;
  const rules = alertRules(deps.store);
  const machine = alertRuleMachine.provide({
    actors: { evaluate: fromEffect(evaluateEffect(deps)), notify: fromEffect(notifyEffect(deps)), sleepUntil },
  });
  return {
    name: ALERT_RULE_KIND,
    machine,
    input: (id) => ({ id, intervalMs }),
    settled: (s) => !s.hasTag('busy'),
    reply: (s): AlertRuleReply => {
      const c = s.context as AlertRuleContext;
      return { account_id: c.accountId, deleted: s.hasTag('done'), rule: s.hasTag('done') ? null : ruleViewOf(c) };
    },
    project: async (s, id, version) => {
      if (s.hasTag('done')) {
        await rules.delete({ id });
        return;
      }
      const view = ruleViewOf(s.context as AlertRuleContext);
      if (!view) return;
      // Never inserts: the record exists from the create route on, and is gone once deleted.
      const { id: _id, ...fields } = view;
      await rules.update({ id, snapshot_version: { $lt: version } }, { $set: { snapshot_version: version, ...fields } });
    },
  };
}
