import type { AnyStateMachine } from 'xstate';
import { alertRuleMachine } from './alert-rule.js';
import { callMachine } from './call.js';
import { conversationMachine } from './conversation.js';
import { counterMachine } from './counter.js';
import { deliveryMachine } from './delivery.js';
import { sessionMachine } from './session.js';

/**
 * Every machine the inspector draws and the path-coverage test covers, by actor kind. A branch that adds an
 * actor kind (call, alert-rule, delivery, ...) adds one line here and its event samples in
 * `test/fixtures/machine-events.ts`; its chart then appears at `/admin/v1/inspector/machines/<kind>.svg`, in
 * `switchboard charts` and in `docs/charts/`.
 */
export const MACHINES: Readonly<Record<string, AnyStateMachine>> = {
  counter: counterMachine,
  conversation: conversationMachine,
  session: sessionMachine,
  call: callMachine,
  delivery: deliveryMachine,
  'alert-rule': alertRuleMachine,
};

/** The kinds of the catalog, sorted. */
export const machineKinds = (): string[] => Object.keys(MACHINES).sort();
