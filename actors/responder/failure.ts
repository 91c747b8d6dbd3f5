/**
 * A responder's failure with its cause, as contract 7.4 tells causes apart (`ResponderFailure`): the model server
 * did not answer (`respond`), or its answer broke off or was not valid data (`stream`). The conversation picks its
 * apology by it, and a messaging session its error event.
 */
import type { ResponderFailure } from '../../machines/conversation.js';

export type { ResponderFailure };

/** A responder call that failed, and why. */
export class ResponderError extends Error {
  constructor(
    message: string,
    readonly failure: ResponderFailure,
  ) {
    super(message);
    this.name = 'ResponderError';
  }
}

/** The cause of a responder's rejection: its own when it says one, else `respond` (it did not answer). */
export const failureOf = (err: unknown): ResponderFailure => (err instanceof ResponderError ? err.failure : 'respond');
