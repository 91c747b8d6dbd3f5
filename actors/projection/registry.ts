import { conversationsProjector } from '../conversation/projectors/conversations.js';
import { metricsProjector } from '../metrics/mod.js';
import type { Projector } from './types.js';
import { sessionRecordsProjector } from '../session/mod.js';
import { actorIndexProjector } from '../inspector/mod.js';
import { recordingsProjector } from '../recording/projector.js';

/**
 * Every read model projected from the journal. A branch that adds a projector adds one line here. The
 * `PROJECTION_MODULES` setting adds projectors from other modules (the tests' own projector).
 */
export function projectors(): Projector[] {
  return [
    sessionRecordsProjector,
    actorIndexProjector, // the inspector's actor index (actors/inspector/actor-index.ts)
    conversationsProjector(),
    metricsProjector(),
    recordingsProjector(),
  ];
}
