/**
 * What the inspector reads from the actor side: the actor index, a projection of the journal (search by
 * kind, state and project; counts per kind and state across the fleet).
 */
export { actorCounts, actorIndex, actorIndexProjector, searchActors, statePaths, COUNT_LIMIT, REFRESH_MS, type ActorIndexRecord, type ActorSearch } from './actor-index.js';
