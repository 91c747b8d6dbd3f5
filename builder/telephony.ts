/**
 * Telephony resources of an agent (contract 2.1: not branch-scoped): SIP trunks (`telephony_connectors`,
 * ids `tc_…`) and the E.164 numbers bound to them (`telephony_phone_numbers`, ids `pn_…`). Store-backed and
 * free of HTTP: the Agents API routes (`gateway/edge/agents/telephony-routes.ts`) call these, and so do the
 * media gateway (which trunk to dial through, which agent an INVITE's number belongs to) and the call actor.
 *
 * Every query that serves a caller is scoped to the account and agent (the agent id is the project id);
 * `numberByE164` and `trunk` are the platform's own lookups by globally unique keys.
 */
import { StoreDuplicateError, type Collection, type Doc, type Store } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';

/**
 * How long a connector's `deleting_at` mark holds. A delete marks, counts and deletes or unmarks in a few store
 * round trips; a mark older than this belongs to a delete whose process died between its steps, and is ignored.
 */
const DELETE_MARK_MS = 10_000;
/** How often a write that found a connector marked reads it again for the delete's outcome. */
const DELETE_POLL_MS = 20;

export const SIP_TRANSPORTS = ['udp', 'tcp', 'tls'] as const;
export type SipTransport = (typeof SIP_TRANSPORTS)[number];

/**
 * How the media gateway hands a call on to a handoff's destination through this trunk: `refer`, a blind
 * transfer (the far end calls the destination; the call leaves the platform), or `bridge`, the gateway calls
 * the destination itself and relays the audio, so it knows when the bridged call ends and reports it through
 * the bridge-ended path (docs/telephony.md).
 */
export const TRANSFER_MODES = ['refer', 'bridge'] as const;
export type TransferMode = (typeof TRANSFER_MODES)[number];

/** The account and agent (= project) a telephony resource belongs to. */
export interface TelephonyScope {
  account_id: string;
  agent_id: string;
}

/**
 * A SIP trunk. `password` is stored as given, not hashed: SIP digest authentication (RFC 8760 / 2617)
 * computes `MD5(username:realm:password)` with the realm the far end names in its challenge, so the platform
 * must be able to recover the password itself. It lives only in the platform's own store (the data directory
 * or MongoDB, both access-controlled by the operator) and is never returned by any read: `viewConnector`
 * leaves it out and says only whether one is set.
 */
export interface TelephonyConnectorRecord extends Doc {
  account_id: string;
  agent_id: string;
  name: string;
  host: string;
  port: number;
  transport: SipTransport;
  username: string | null;
  password: string | null;
  /** Calls this trunk carries at once; null: the platform's `OUTBOUND_TRUNK_CONCURRENCY`. */
  max_concurrent_calls: number | null;
  transfer: TransferMode;
  created_at: string;
  /**
   * Set (ms since the epoch) while a `deleteConnector` counts the numbers bound to it, absent otherwise; never
   * shown. A number bound at the same moment waits for that delete's outcome (see `deleteConnector`).
   */
  deleting_at?: number;
}

export interface PhoneNumberRecord extends Doc {
  account_id: string;
  agent_id: string;
  /** E.164, unique across the platform: an INVITE to it must name one agent. */
  number: string;
  connector_id: string;
  variant_id: string | null;
  created_at: string;
}

/** What a connector shows: everything but the password. */
export interface TelephonyConnectorView {
  id: string;
  name: string;
  host: string;
  port: number;
  transport: SipTransport;
  username: string | null;
  has_password: boolean;
  max_concurrent_calls: number | null;
  transfer: TransferMode;
  created_at: string;
}

export interface PhoneNumberView {
  id: string;
  number: string;
  connector_id: string;
  variant_id: string | null;
  created_at: string;
}

/** Where and how to reach a trunk: what the media gateway needs to send an INVITE through it. */
export interface Trunk {
  host: string;
  port: number;
  transport: SipTransport;
  username?: string;
  password?: string;
  /** Connector's own concurrency limit, when it sets one. */
  max_concurrent_calls?: number;
  /** How a call through this trunk is handed on to a handoff's destination. */
  transfer: TransferMode;
}

export interface ConnectorInput {
  name: string;
  host: string;
  port: number;
  transport: SipTransport;
  username?: string | null;
  password?: string | null;
  max_concurrent_calls?: number | null;
  /** Default `refer`. */
  transfer?: TransferMode;
}

/**
 * A change to a connector: the fields given replace the stored ones; `null` clears an optional one (the
 * password too, which is still never shown). Calls in progress keep the trunk they were placed or answered with;
 * the next INVITE, dial or handoff reads the changed one.
 */
export type ConnectorChange = Partial<ConnectorInput>;

/** A change to a phone number's binding: another connector of the agent, or another variant (null: none). */
export interface NumberChange {
  connector_id?: string;
  variant_id?: string | null;
}

export interface NumberInput {
  /** Already normalised to E.164 by the caller. */
  number: string;
  connector_id: string;
  variant_id?: string | null;
}

export interface Telephony {
  createConnector(scope: TelephonyScope, input: ConnectorInput): Promise<TelephonyConnectorRecord>;
  listConnectors(scope: TelephonyScope): Promise<TelephonyConnectorRecord[]>;
  /** Throws `AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND` when it is not this agent's. */
  getConnector(scope: TelephonyScope, id: string): Promise<TelephonyConnectorRecord>;
  /** Throws `AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND` when it is not this agent's. */
  updateConnector(scope: TelephonyScope, id: string, change: ConnectorChange): Promise<TelephonyConnectorRecord>;
  /**
   * Refused (`AGENTS.TELEPHONY_CONNECTOR_IN_USE`, 409) while numbers are bound to it; a number bound at the same
   * moment either makes it 409 or is refused itself. `AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND` when it is not this
   * agent's, or another delete of it won.
   */
  deleteConnector(scope: TelephonyScope, id: string): Promise<void>;
  /**
   * Throws `AGENTS.TELEPHONY_NUMBER_EXISTS` (409) when the number is bound anywhere already,
   * `AGENTS.TELEPHONY_CONNECTOR_UNKNOWN` when `connector_id` names no connector of this agent or one a delete
   * at the same moment removed (the number is then not kept).
   */
  createNumber(scope: TelephonyScope, input: NumberInput): Promise<PhoneNumberRecord>;
  listNumbers(scope: TelephonyScope): Promise<PhoneNumberRecord[]>;
  getNumber(scope: TelephonyScope, id: string): Promise<PhoneNumberRecord>;
  /**
   * Throws `AGENTS.TELEPHONY_CONNECTOR_UNKNOWN` when `connector_id` names no connector of this agent, or one a
   * delete at the same moment removed (the change is then undone).
   */
  updateNumber(scope: TelephonyScope, id: string, change: NumberChange): Promise<PhoneNumberRecord>;
  deleteNumber(scope: TelephonyScope, id: string): Promise<void>;
  /** The binding of an E.164 number (the platform's inbound lookup), or null. */
  numberByE164(e164: string): Promise<PhoneNumberRecord | null>;
  /** How to reach a connector's trunk, or null when it does not exist. */
  trunk(connectorId: string): Promise<Trunk | null>;
  /** The connector record by id alone (platform-internal; never rendered with its password). */
  connectorById(connectorId: string): Promise<TelephonyConnectorRecord | null>;
}

export function telephonyCollections(store: Store): {
  connectors: Collection<TelephonyConnectorRecord>;
  numbers: Collection<PhoneNumberRecord>;
} {
  return {
    connectors: store.collection<TelephonyConnectorRecord>({
      name: 'telephony_connectors',
      indexes: [{ fields: ['account_id', 'agent_id', 'created_at'] }],
    }),
    numbers: store.collection<PhoneNumberRecord>({
      name: 'telephony_phone_numbers',
      indexes: [{ fields: ['number'], unique: true }, { fields: ['account_id', 'agent_id', 'created_at'] }, { fields: ['connector_id'] }],
    }),
  };
}

/** The telephony resources over a store. */
export function telephony(store: Store): Telephony {
  const { connectors, numbers } = telephonyCollections(store);
  const scoped = (scope: TelephonyScope) => ({ account_id: scope.account_id, agent_id: scope.agent_id });

  const getConnector = async (scope: TelephonyScope, id: string): Promise<TelephonyConnectorRecord> => {
    const c = await connectors.findOne({ id, ...scoped(scope) });
    if (!c) throw AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND();
    return c;
  };
  const getNumber = async (scope: TelephonyScope, id: string): Promise<PhoneNumberRecord> => {
    const n = await numbers.findOne({ id, ...scoped(scope) });
    if (!n) throw AGENTS.TELEPHONY_NUMBER_NOT_FOUND();
    return n;
  };
  /** A mark that still holds: a delete is under way (an older one is a delete that died). */
  const marked = (c: TelephonyConnectorRecord): boolean => typeof c.deleting_at === 'number' && c.deleting_at > Date.now() - DELETE_MARK_MS;
  /**
   * Whether the connector stands once no delete of it is under way: false when it is gone, true when it is
   * there unmarked; while it is marked, it is read again every `DELETE_POLL_MS` until that delete has deleted
   * or unmarked it (or its mark has lapsed, which bounds the wait). Read fresh each time (`store.refresh`): the
   * embedded store's reads go through a snapshot that may predate the write this is ordered after.
   */
  const settled = async (scope: TelephonyScope, id: string): Promise<boolean> => {
    for (;;) {
      store.refresh();
      const c = await connectors.findOne({ id, ...scoped(scope) });
      if (!c) return false;
      if (!marked(c)) return true;
      await new Promise((resolve) => setTimeout(resolve, DELETE_POLL_MS));
    }
  };

  return {
    async createConnector(scope, input) {
      return connectors.insert({
        id: newId('tc'),
        ...scoped(scope),
        name: input.name,
        host: input.host,
        port: input.port,
        transport: input.transport,
        username: input.username ?? null,
        password: input.password ?? null,
        max_concurrent_calls: input.max_concurrent_calls ?? null,
        transfer: input.transfer ?? 'refer',
        created_at: nowIso(),
      });
    },
    listConnectors: (scope) => connectors.find(scoped(scope), { sort: { created_at: 1 } }),
    getConnector,
    async updateConnector(scope, id, change) {
      const set: Partial<TelephonyConnectorRecord> = {};
      for (const key of ['name', 'host', 'port', 'transport', 'username', 'password', 'max_concurrent_calls', 'transfer'] as const) {
        if (change[key] !== undefined) Object.assign(set, { [key]: change[key] });
      }
      if (Object.keys(set).length === 0) return getConnector(scope, id);
      const updated = await connectors.update({ id, ...scoped(scope) }, { $set: set });
      if (!updated) throw AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND();
      return updated;
    },
    async deleteConnector(scope, id) {
      // Refused rather than cascading: deleting a trunk silently unbinding live numbers would make inbound
      // calls to them fail with no trace of why. Delete the numbers first.
      //
      // The count and the delete are two store operations, and the store has no transaction over both, so a
      // number bound between them would be left bound to a deleted trunk. The connector is therefore marked
      // (`deleting_at`) before the count, and a number's create or move re-reads its connector after its own
      // write (`settled`): if it reads the connector unmarked, this mark comes later and the count sees the
      // number (409); if it reads the mark, it waits for this delete's outcome and undoes its write if the
      // connector is gone. Edge processes share the store, so nothing in-process would do.
      for (;;) {
        const mark = Date.now();
        // Only over no mark (or a lapsed one): two deletes at once must not share one, or the one refused
        // would unmark the connector while the other is still counting.
        const free = { $or: [{ deleting_at: null }, { deleting_at: { $lte: mark - DELETE_MARK_MS } }] };
        const unmark = () => connectors.update({ id, deleting_at: mark }, { $unset: { deleting_at: '' } });
        if (await connectors.update({ id, ...scoped(scope), ...free }, { $set: { deleting_at: mark } })) {
          store.refresh();
          if ((await numbers.count({ connector_id: id })) > 0) {
            await unmark();
            throw AGENTS.TELEPHONY_CONNECTOR_IN_USE();
          }
          // Only while the mark still holds: a bind that waited it out (a delete stalled past `DELETE_MARK_MS`)
          // kept its number, so a lapsed mark is taken off and the delete starts over.
          if (Date.now() - mark >= DELETE_MARK_MS) {
            await unmark();
            continue;
          }
          if ((await connectors.delete({ id, deleting_at: mark, ...scoped(scope) })) > 0) return;
          // Our mark is gone: the connector was deleted meanwhile (404 below), or our mark lapsed and another
          // delete took it over (its outcome decides, as below).
        }
        // Not ours to mark: gone (404), or another delete is under way, whose outcome decides: gone, 404
        // (that delete won); unmarked (it was refused), try again.
        if (!(await settled(scope, id))) throw AGENTS.TELEPHONY_CONNECTOR_NOT_FOUND();
      }
    },
    async createNumber(scope, input) {
      // The fast answer for a connector that is not the agent's; the check that counts comes after the insert.
      if (!(await connectors.findOne({ id: input.connector_id, ...scoped(scope) }))) throw AGENTS.TELEPHONY_CONNECTOR_UNKNOWN();
      let created: PhoneNumberRecord;
      try {
        created = await numbers.insert({
          id: newId('pn'),
          ...scoped(scope),
          number: input.number,
          connector_id: input.connector_id,
          variant_id: input.variant_id ?? null,
          created_at: nowIso(),
        });
      } catch (err) {
        if (err instanceof StoreDuplicateError) throw AGENTS.TELEPHONY_NUMBER_EXISTS();
        throw err;
      }
      // A delete of the connector at the same moment may have counted before the insert (see `deleteConnector`).
      if (!(await settled(scope, input.connector_id))) {
        await numbers.delete({ id: created.id, connector_id: input.connector_id });
        throw AGENTS.TELEPHONY_CONNECTOR_UNKNOWN();
      }
      return created;
    },
    listNumbers: (scope) => numbers.find(scoped(scope), { sort: { created_at: 1 } }),
    getNumber,
    async updateNumber(scope, id, change) {
      // Unknown number first (404), then a connector that is not the agent's (400).
      const current = await getNumber(scope, id);
      if (change.connector_id !== undefined && !(await connectors.findOne({ id: change.connector_id, ...scoped(scope) }))) throw AGENTS.TELEPHONY_CONNECTOR_UNKNOWN();
      const set: Partial<PhoneNumberRecord> = {};
      if (change.connector_id !== undefined) set.connector_id = change.connector_id;
      if (change.variant_id !== undefined) set.variant_id = change.variant_id;
      if (Object.keys(set).length === 0) return current;
      const updated = await numbers.update({ id, ...scoped(scope) }, { $set: set });
      if (!updated) throw AGENTS.TELEPHONY_NUMBER_NOT_FOUND();
      // Moved to a connector a delete at the same moment may have counted before the move (see
      // `deleteConnector`): if that delete won, the change is undone (a 400 changes nothing), unless the number
      // was changed again since (compare-and-set on what this change wrote).
      if (change.connector_id !== undefined && change.connector_id !== current.connector_id && !(await settled(scope, change.connector_id))) {
        const before: Partial<PhoneNumberRecord> = { connector_id: current.connector_id };
        if (set.variant_id !== undefined) before.variant_id = current.variant_id;
        await numbers.update({ id, ...set }, { $set: before });
        throw AGENTS.TELEPHONY_CONNECTOR_UNKNOWN();
      }
      return updated;
    },
    async deleteNumber(scope, id) {
      await getNumber(scope, id);
      await numbers.delete({ id, ...scoped(scope) });
    },
    numberByE164: (e164) => numbers.findOne({ number: e164 }),
    async trunk(connectorId) {
      const c = await connectors.get(connectorId);
      if (!c) return null;
      return {
        host: c.host,
        port: c.port,
        transport: c.transport,
        ...(c.username !== null ? { username: c.username } : {}),
        ...(c.password !== null ? { password: c.password } : {}),
        ...(c.max_concurrent_calls !== null ? { max_concurrent_calls: c.max_concurrent_calls } : {}),
        transfer: c.transfer,
      };
    },
    connectorById: (connectorId) => connectors.get(connectorId),
  };
}

export function viewTelephonyConnector(c: TelephonyConnectorRecord): TelephonyConnectorView {
  return {
    id: c.id,
    name: c.name,
    host: c.host,
    port: c.port,
    transport: c.transport,
    username: c.username,
    has_password: c.password !== null,
    max_concurrent_calls: c.max_concurrent_calls,
    transfer: c.transfer,
    created_at: c.created_at,
  };
}

export function viewPhoneNumber(n: PhoneNumberRecord): PhoneNumberView {
  return { id: n.id, number: n.number, connector_id: n.connector_id, variant_id: n.variant_id, created_at: n.created_at };
}
