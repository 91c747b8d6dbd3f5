/**
 * The `alert-rule` actor kind's public module: alert rules that evaluate a metric on a durable schedule and
 * send `alerts.triggered` / `alerts.resolved` webhooks. Gateways, `platform/` and `bin/` import this file,
 * never the files beside it.
 *
 * @module
 */
export { alertRuleKind, DEFAULT_EVAL_INTERVAL_MS, type AlertRuleKindDeps, type AlertRuleReply } from './kind.js';
export { alertRules, ruleView, ruleViewOf, ALERT_RULE_KIND, RULE_ID, MAX_RULES_PER_ACCOUNT, type AlertRuleRecord, type AlertRuleView } from './rules.js';
export { webhookBody, webhookEventId, type AlertRuleDeps } from './effects.js';
export { METRICS, OPERATORS, WINDOWS, RULE_STATES, type Metric, type Operator, type WindowDuration, type RuleState, type RuleDefinition } from '../../machines/alert-rule.js';
