import { z } from 'zod';
import { METRICS, OPERATORS, RULE_ID, RULE_STATES, WINDOWS } from '../../../actors/alert-rule/mod.js';

/** The messages of contract 2.3 / 7.2, one per field rule. */
export const MESSAGES = {
  name: 'name must be between 1 and 128 characters',
  project_id: 'project_id must be a string or null',
  metric: `metric must be one of ${METRICS.join(', ')}`,
  operator: `operator must be one of ${OPERATORS.join(', ')}`,
  threshold_value: 'threshold_value must be a non-negative integer',
  window_duration: `window_duration must be one of ${WINDOWS.join(', ')}`,
  enabled: 'enabled must be a boolean',
  state: `state must be one of ${RULE_STATES.join(', ')}`,
} as const;

const name = z.string({ error: MESSAGES.name }).min(1, MESSAGES.name).max(128, MESSAGES.name);
const projectId = z.string({ error: MESSAGES.project_id }).min(1, MESSAGES.project_id).max(128, MESSAGES.project_id).nullable();
const metric = z.enum(METRICS, { error: MESSAGES.metric });
const operator = z.enum(OPERATORS, { error: MESSAGES.operator });
const threshold = z.number({ error: MESSAGES.threshold_value }).int(MESSAGES.threshold_value).min(0, MESSAGES.threshold_value).max(Number.MAX_SAFE_INTEGER, MESSAGES.threshold_value);
const windowDuration = z.enum(WINDOWS, { error: MESSAGES.window_duration });
const enabled = z.boolean({ error: MESSAGES.enabled });

/** `POST /v1/alert-rules` (contract 4.2). */
export const CreateRuleBody = z
  .object({
    name,
    project_id: projectId.default(null),
    metric,
    operator,
    threshold_value: threshold,
    window_duration: windowDuration,
    enabled: enabled.default(true),
  })
  .strict();

/** `PATCH /v1/alert-rules/{rule_id}`: any of the fields, flat; only those given change. */
export const UpdateRuleBody = z.object({ name, project_id: projectId, metric, operator, threshold_value: threshold, window_duration: windowDuration, enabled }).partial().strict();

const bool = z.enum(['true', 'false'], { error: MESSAGES.enabled });
const projectFilter = z.string().min(1, 'project_id must not be empty').max(128, 'project_id is at most 128 characters');

/**
 * `GET /v1/alert-rules`: the four filters (contract 4.2). Other query parameters are ignored, as a list without
 * pagination is usually called with whatever a client's generic list helper adds (`limit`, `page`); a filter
 * given a bad value is refused.
 */
export const ListRulesQuery = z.object({
  enabled: bool.optional(),
  metric: metric.optional(),
  project_id: projectFilter.optional(),
  state: z.enum(RULE_STATES, { error: MESSAGES.state }).optional(),
});

/** `GET /v1/alerts` (addendum); other query parameters are ignored, as for the rules. */
export const ListAlertsQuery = z.object({ project_id: projectFilter.optional(), metric: metric.optional() });

/** The rule id in a path: anything else is a malformed id (422). */
export const RuleParams = z.object({ rule_id: z.string().regex(RULE_ID, 'malformed alert rule id') });

/** An alert rule (contract 2.3). */
export const RuleView = z.object({
  id: z.string(),
  name: z.string(),
  project_id: z.string().nullable(),
  metric: z.enum(METRICS),
  operator: z.enum(OPERATORS),
  threshold_value: z.number().int(),
  window_duration: z.enum(WINDOWS),
  enabled: z.boolean(),
  current_state: z.enum(RULE_STATES),
  created_at: z.string(),
  updated_at: z.string(),
  since: z.string().nullable(),
  last_evaluated_at: z.string().nullable(),
  current_value: z.number().int().nullable(),
});

/** An active alert (addendum: `GET /v1/alerts`): its rule's fields, under `alert_rule_id`, in the rule's order. */
export const ActiveAlertView = z.object({
  alert_rule_id: z.string(),
  ...RuleView.pick({
    name: true,
    project_id: true,
    metric: true,
    operator: true,
    threshold_value: true,
    window_duration: true,
    since: true,
    last_evaluated_at: true,
    current_value: true,
  }).shape,
});
