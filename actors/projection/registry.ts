import type { Projector } from './types.js';
import { recordingsProjector } from '../recording/projector.js';

/**
 * Every read model projected from the journal. A branch that adds a projector adds one line here. The
 * `PROJECTION_MODULES` setting adds projectors from other modules (the tests' own projector).
 */
export function projectors(): Projector[] {
  return [
    recordingsProjector(),
  ];
}
