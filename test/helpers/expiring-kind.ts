import { assign, setup } from 'xstate';
import type { ActorKind } from '../../actors/mod.js';

/**
 * A kind whose deadline the host keeps (`ActorKind.deadline`): `ARM` sets it, the host's `EXPIRE` fires it
 * once it has passed (the machine's guard checks, as the conversation's idle timeout does).
 */
const expiringMachine = setup({
  types: {} as { context: { deadline: number | null; fired: number; firedAt: number | null }; events: { type: 'ARM'; at: number } | { type: 'EXPIRE'; at: number } },
}).createMachine({
  context: { deadline: null, fired: 0, firedAt: null },
  on: {
    ARM: { actions: assign({ deadline: ({ event }) => event.at }) },
    EXPIRE: {
      guard: ({ context, event }) => context.deadline !== null && event.at >= context.deadline,
      actions: assign({ deadline: null, fired: ({ context }) => context.fired + 1, firedAt: ({ event }) => event.at }),
    },
  },
});

export const expiring: ActorKind = {
  name: 'expiring',
  machine: expiringMachine,
  reply: (s) => s.context,
  deadline: { name: 'expiry', of: (s) => s.context.deadline, event: (at) => ({ type: 'EXPIRE', at }) },
};
