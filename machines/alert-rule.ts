import { assign, emit, fromPromise, setup } from 'xstate';

/**
 * One alert rule (contract 2.3, 3.1): its definition, and the evaluation of its metric on a durable schedule.
 * Every evaluation is the `evaluate` effect (reads the metric buckets; provided by `actors/alert-rule`), waits
 * between evaluations are the durable `sleepUntil` on an absolute deadline (`evaluatedAt + intervalMs`), so
 * a rule keeps its schedule across restarts and failover. The machine decides what a reading means: `alert`
 * when the value breaches the threshold, `ok` when it is within, `no_data` when the window held no data,
 * `unknown` when the reading failed. A move into `alert` emits `alert.triggered` (with `previous_state`), a
 * move from `alert` back to `ok` emits `alert.resolved`; either also sets a notice that the `notify` effect
 * sends as a webhook (kept until sent, tried again after the next evaluation when sending failed).
 *
 * States: `new` → (`CREATE`) `waiting` (until `nextAt`, the creation time: a new rule is `ok` until its first
 * evaluation, contract 3.1) → `evaluating` (tag `busy`) → `notifying` (tag `busy`, only with a notice) →
 * `waiting` → `evaluating` ...; a disabled rule rests in `disabled`; `UPDATE` re-evaluates at once (or rests
 * when it disables the rule); `DELETE` ends in `deleted` (tag `done`).
 */

export const METRICS = ['turn_latency_p50', 'turn_latency_p95', 'api_errors', 'function_errors', 'call_crashes', 'call_volume'] as const;
export type Metric = (typeof METRICS)[number];
export const OPERATORS = ['>', '<', '>=', '<='] as const;
export type Operator = (typeof OPERATORS)[number];
export const WINDOWS = ['5m', '10m', '60m'] as const;
export type WindowDuration = (typeof WINDOWS)[number];
export const RULE_STATES = ['ok', 'alert', 'no_data', 'unknown'] as const;
export type RuleState = (typeof RULE_STATES)[number];

/** Minutes of each window. */
export const WINDOW_MINUTES: Record<WindowDuration, number> = { '5m': 5, '10m': 10, '60m': 60 };

/** What a rule's owner decides. */
export interface RuleDefinition {
  name: string;
  project_id: string | null;
  metric: Metric;
  operator: Operator;
  threshold_value: number;
  window_duration: WindowDuration;
  enabled: boolean;
}

export interface AlertRuleInput {
  id: string;
  /** Between evaluations (`ALERTS_EVAL_INTERVAL_MS`). */
  intervalMs: number;
}

/** A webhook to send: a move into `alert` or back to `ok`. */
export interface Notice {
  type: 'alerts.triggered' | 'alerts.resolved';
  /** Counts the rule's notices: with the rule id, the event's stable id. */
  n: number;
  previousState: RuleState;
  currentValue: number | null;
  at: number;
}

export interface AlertRuleContext extends AlertRuleInput {
  accountId: string | null;
  rule: RuleDefinition | null;
  createdAt: number | null;
  updatedAt: number | null;
  state: RuleState;
  /** When `state` was entered (ms), null before the first evaluation. */
  since: number | null;
  lastEvaluatedAt: number | null;
  currentValue: number | null;
  /** The time the next (or running) evaluation reads the window up to. */
  evalAt: number | null;
  nextAt: number | null;
  notices: number;
  notice: Notice | null;
  /** The state before the reading being judged. */
  previousState: RuleState;
}

/** What the `evaluate` effect reports: the metric over the window ending at `at`, null when it held no data. */
export interface Reading {
  value: number | null;
}

export interface EvaluateInput {
  ruleId: string;
  accountId: string;
  rule: RuleDefinition;
  at: number;
}

export interface NotifyInput {
  ruleId: string;
  accountId: string;
  rule: RuleDefinition;
  notice: Notice;
}

export type AlertRuleEvent =
  | { type: 'CREATE'; account_id: string; rule: RuleDefinition; at: number }
  | { type: 'UPDATE'; changes: Partial<RuleDefinition>; at: number }
  | { type: 'DELETE'; at: number };

interface AlertEventData {
  account_id: string;
  project_id: string | null;
  rule_id: string;
  metric: Metric;
  operator: Operator;
  threshold_value: number;
  current_value: number | null;
  previous_state: RuleState;
  at: number;
}

/** Domain events the machine emits (journaled with the step). */
export type AlertRuleEmitted =
  | { type: 'alert.triggered'; data: AlertEventData }
  | { type: 'alert.resolved'; data: AlertEventData };

/** Whether `value` breaches `threshold` under `operator`. */
export function breaches(value: number, operator: Operator, threshold: number): boolean {
  switch (operator) {
    case '>': return value > threshold;
    case '<': return value < threshold;
    case '>=': return value >= threshold;
    case '<=': return value <= threshold;
  }
}

/** The state a reading puts the rule in. */
export const judged = (rule: RuleDefinition, r: Reading): RuleState =>
  r.value === null ? 'no_data' : breaches(r.value, rule.operator, rule.threshold_value) ? 'alert' : 'ok';

/**
 * Whether a move ends a firing alert: back within the threshold (`ok`, contract 3.1), or no data left in the
 * window (the traffic that breached it stopped: the alert is over, and a receiver's incident would otherwise
 * stay open until traffic came back). A failed evaluation (`unknown`) ends nothing: the alert may still hold.
 */
export const ends = (from: RuleState, to: RuleState): boolean => from === 'alert' && (to === 'ok' || to === 'no_data');

/** The context after a reading (or a failed one, `reading` null) at `at`. */
function afterReading(c: AlertRuleContext, reading: Reading | null): Partial<AlertRuleContext> {
  const at = c.evalAt!;
  const next = reading === null ? 'unknown' : judged(c.rule!, reading);
  const value = reading === null ? null : reading.value;
  const moved = next !== c.state || c.since === null;
  let notice = c.notice;
  let notices = c.notices;
  if (next === 'alert' && c.state !== 'alert') notice = { type: 'alerts.triggered', n: ++notices, previousState: c.state, currentValue: value, at };
  else if (ends(c.state, next)) notice = { type: 'alerts.resolved', n: ++notices, previousState: c.state, currentValue: value, at };
  return {
    state: next,
    since: moved ? at : c.since,
    lastEvaluatedAt: at,
    currentValue: value,
    nextAt: at + c.intervalMs,
    notices,
    notice,
  };
}

const eventData = (c: AlertRuleContext, previous: RuleState): AlertEventData => ({
  account_id: c.accountId!,
  project_id: c.rule!.project_id,
  rule_id: c.id,
  metric: c.rule!.metric,
  operator: c.rule!.operator,
  threshold_value: c.rule!.threshold_value,
  current_value: c.currentValue,
  previous_state: previous,
  at: c.lastEvaluatedAt!,
});

export const alertRuleMachine = setup({
  types: {} as { context: AlertRuleContext; events: AlertRuleEvent; input: AlertRuleInput; emitted: AlertRuleEmitted },
  actors: {
    // Provided by the actor host (actors/alert-rule): a machine does no I/O of its own.
    evaluate: fromPromise<Reading, EvaluateInput>(async () => {
      throw new Error('evaluate is provided by the actor host');
    }),
    notify: fromPromise<void, NotifyInput>(async () => {
      throw new Error('notify is provided by the actor host');
    }),
    sleepUntil: fromPromise<number, { until: number }>(async () => {
      throw new Error('sleepUntil is provided by the actor host');
    }),
  },
  guards: {
    enabled: ({ context }) => context.rule?.enabled === true,
    hasNotice: ({ context }) => context.notice !== null,
  },
  actions: {
    read: assign(({ context }, reading: Reading | null) => ({ previousState: context.state, ...afterReading(context, reading) })),
    emitTriggered: emit(({ context }) => ({ type: 'alert.triggered' as const, data: eventData(context, context.previousState) })),
    emitResolved: emit(({ context }) => ({ type: 'alert.resolved' as const, data: eventData(context, context.previousState) })),
  },
}).createMachine({
  id: 'alertRule',
  context: ({ input }) => ({
    accountId: null,
    rule: null,
    createdAt: null,
    updatedAt: null,
    state: 'ok',
    since: null,
    lastEvaluatedAt: null,
    currentValue: null,
    evalAt: null,
    nextAt: null,
    notices: 0,
    notice: null,
    previousState: 'ok',
    ...input,
  }),
  initial: 'new',
  states: {
    new: {
      on: {
        // `ok` until the first evaluation (contract 3.1), which the durable tick starts at once, after the
        // step that creates the rule: the answer to the create is the new rule, not its first reading.
        CREATE: {
          target: 'created',
          actions: assign(({ event }) => ({ accountId: event.account_id, rule: event.rule, createdAt: event.at, updatedAt: event.at, nextAt: event.at })),
        },
      },
    },
    created: {
      always: [{ guard: 'enabled', target: 'waiting' }, { target: 'disabled' }],
    },
    deciding: {
      always: [{ guard: 'enabled', target: 'evaluating' }, { target: 'disabled' }],
    },
    evaluating: {
      tags: ['busy'],
      invoke: {
        id: 'evaluate',
        src: 'evaluate',
        input: ({ context }): EvaluateInput => ({ ruleId: context.id, accountId: context.accountId!, rule: context.rule!, at: context.evalAt! }),
        onDone: { target: 'judged', actions: { type: 'read', params: ({ event }) => event.output } },
        // The metric store could not be read: `unknown` until a reading succeeds.
        onError: { target: 'judged', actions: { type: 'read', params: () => null } },
      },
    },
    // Transient: the domain events of the reading, then a notice to send or the wait for the next one.
    judged: {
      always: [
        { guard: ({ context }) => context.previousState !== 'alert' && context.state === 'alert', target: 'notifying', actions: 'emitTriggered' },
        { guard: ({ context }) => ends(context.previousState, context.state), target: 'notifying', actions: 'emitResolved' },
        { guard: 'hasNotice', target: 'notifying' },
        { target: 'waiting' },
      ],
    },
    notifying: {
      tags: ['busy'],
      invoke: {
        id: 'notify',
        src: 'notify',
        input: ({ context }): NotifyInput => ({ ruleId: context.id, accountId: context.accountId!, rule: context.rule!, notice: context.notice! }),
        onDone: { target: 'waiting', actions: assign({ notice: null }) },
        // Kept: sent again after the next evaluation (the event id is the same, so never twice).
        onError: 'waiting',
      },
    },
    waiting: {
      invoke: {
        id: 'tick',
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.nextAt! }),
        onDone: { target: 'evaluating', actions: assign({ evalAt: ({ event }) => event.output }) },
      },
    },
    disabled: {},
    // Final for the API (the record is gone); events after it change nothing.
    deleted: { tags: ['done'], on: { UPDATE: {}, DELETE: {} } },
  },
  on: {
    UPDATE: {
      guard: ({ context }) => context.rule !== null,
      target: '.deciding',
      reenter: true,
      actions: assign(({ context, event }) => {
        const rule = { ...context.rule!, ...event.changes };
        return { rule, updatedAt: event.at, evalAt: event.at };
      }),
    },
    DELETE: { guard: ({ context }) => context.rule !== null, target: '.deleted' },
  },
});

