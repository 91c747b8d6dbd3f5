import type { EvaluateInput, NotifyInput, Reading } from '../../machines/alert-rule.js';
import { WINDOW_MINUTES } from '../../machines/alert-rule.js';
import type { Store } from '../../store/mod.js';
import type { ActorClient } from '../client.js';
import { dispatchWebhookEvent } from '../delivery/mod.js';
import { accountScope, metricValue, projectScope, readWindow } from '../metrics/mod.js';

/** What the effects of a rule need. */
export interface AlertRuleDeps {
  store: Store;
  /** The runtime's client (to start delivery actors), once it has started. */
  client: () => Promise<Pick<ActorClient, 'ask'>>;
}

/** The `evaluate` effect: the rule's metric over its window ending at `at`; throws when the buckets cannot be read. */
export function evaluateEffect(deps: AlertRuleDeps) {
  return async (input: EvaluateInput): Promise<Reading> => {
    const scope = input.rule.project_id === null ? accountScope(input.accountId) : projectScope(input.rule.project_id);
    const sums = await readWindow(deps.store, scope, input.at, WINDOW_MINUTES[input.rule.window_duration]);
    return { value: metricValue(sums, input.rule.metric) };
  };
}

/**
 * The id of a rule's `n`th webhook event: the same for every try of one move, so a dispatch repeated after
 * a crash starts no second delivery (delivery event ids take no underscore).
 */
export const webhookEventId = (ruleId: string, n: number) => `alert:${ruleId.replace(/^ar_/, '')}:${n}`;

/** The webhook body of a notice (contract 6.1; addendum for `alerts.resolved`). */
export function webhookBody(input: NotifyInput): object {
  const { rule, notice } = input;
  const at = new Date(notice.at).toISOString();
  return {
    event_type: notice.type,
    alert: {
      id: input.ruleId,
      name: rule.name,
      project_id: rule.project_id,
      metric: rule.metric,
      operator: rule.operator,
      threshold_value: rule.threshold_value,
      current_value: notice.currentValue,
      previous_state: notice.previousState,
      ...(notice.type === 'alerts.triggered' ? { triggered_at: at } : { resolved_at: at }),
    },
  };
}

/** The `notify` effect: the notice as a webhook event to the account's subscribed endpoints. */
export function notifyEffect(deps: AlertRuleDeps) {
  return async (input: NotifyInput): Promise<void> => {
    await dispatchWebhookEvent(
      { store: deps.store, client: await deps.client() },
      { id: webhookEventId(input.ruleId, input.notice.n), type: input.notice.type, account_id: input.accountId, project_id: input.rule.project_id, body: webhookBody(input) },
    );
  };
}
