/**
 * The error catalogs of the REST interface families, in the manner of fastify's `lib/errors.js`: every error
 * a family raises has a stable code, an HTTP status and a message (with `%s` for the values it names). Domain
 * and route code throws `FAMILY.NAME(...values)`, a `PlatformError`; the family's error handler renders it in
 * the family's shape (`gateway/edge/errors.ts`). The code is not part of the response body; it names the
 * error in logs, tests and the reference page `docs/errors.md`, which lists every code (a test keeps the two
 * in step). The Messaging API's catalog is `gateway/socket/errors.ts`: its codes are in its bodies.
 */

/** One problem with one input field, as the `fields`-shaped families report it. */
export interface FieldError {
  field: string;
  message: string;
}

type Value = string | number;

/** One catalog entry. `field` and `detail` give the single field error it carries (none without `field`). */
export interface CatalogEntry {
  readonly code: string;
  readonly status: number;
  /** The message, `%s` standing for the values given when raised, in order. */
  readonly message: string;
  /** The field the error names (`%s` as in `message`, counted from the first value again). */
  readonly field?: string;
  /** The field error's message when it differs from `message`. */
  readonly detail?: string;
}

/** An entry that raises itself: `throw CHAT.VARIANT_UNKNOWN()`. */
export type CatalogError = CatalogEntry & {
  (...values: Value[]): PlatformError;
  /** The same error carrying the given field errors instead of its own. */
  withErrors(errors: FieldError[], ...values: Value[]): PlatformError;
};

export class PlatformError extends Error {
  readonly code: string;
  readonly statusCode: number;
  constructor(
    entry: CatalogEntry,
    values: readonly Value[] = [],
    readonly errors: FieldError[] = entry.field === undefined
      ? []
      : [{ field: format(entry.field, values), message: format(entry.detail ?? entry.message, values) }],
  ) {
    super(format(entry.message, values));
    this.name = 'PlatformError';
    this.code = entry.code;
    this.statusCode = entry.status;
  }
}

/** Too many requests for one key, project or address: the answer carries `Retry-After: retryAfterS`. */
export class RateLimitedError extends PlatformError {
  constructor(
    entry: CatalogEntry,
    readonly retryAfterS: number,
  ) {
    super(entry);
  }
}

function format(template: string, values: readonly Value[]): string {
  let i = 0;
  return template.replace(/%s/g, () => String(values[i++]));
}

type Spec = readonly [status: number, message: string, field?: string, detail?: string];

/** A family's catalog: each key `NAME` becomes the entry with code `<FAMILY>_<NAME>`. */
function catalog<K extends string>(family: string, specs: Record<K, Spec>): Record<K, CatalogError> {
  const out = {} as Record<K, CatalogError>;
  for (const name of Object.keys(specs) as K[]) {
    const [status, message, field, detail] = specs[name];
    const entry: CatalogEntry = { code: `${family}_${name}`, status, message, field, detail };
    const raise = (...values: Value[]) => new PlatformError(entry, values);
    out[name] = Object.assign(raise, entry, {
      withErrors: (errors: FieldError[], ...values: Value[]) => new PlatformError(entry, values, errors),
    });
  }
  return out;
}

/** Every REST family: request checks the framework makes, shared credentials and path resolution. */
export const EDGE = catalog('EDGE', {
  VALIDATION: [400, 'validation error'],
  CONTENT_TYPE_UNSUPPORTED: [400, 'Content-Type must be application/json, not %s', 'body'],
  CONTENT_ENCODING_UNSUPPORTED: [400, 'Content-Encoding %s is not supported: send the body without a content coding', 'content-encoding'],
  TRANSFER_ENCODING_UNSUPPORTED: [400, 'Transfer-Encoding %s is not supported: chunked is the only transfer coding taken', 'transfer-encoding'],
  BODY_TOO_LARGE: [400, 'the body is larger than %s bytes', 'body'],
  REGION_OTHER: [421, 'this address names region %s; this deployment serves %s', 'host'],
  MALFORMED_PARAMS: [422, 'malformed %s'],
  QUERY_REPEATED: [400, '%s may be given only once', '%s'],
  URL_MALFORMED: [400, 'the URL is malformed: a path segment is not valid percent-encoding', 'path'],
  PATH_SEGMENT_TOO_LONG: [400, 'a path segment is longer than %s characters', 'path'],
  ROUTE_NOT_FOUND: [404, 'route %s %s not found'],
  INTERNAL: [500, 'internal server error'],
  API_KEY_MISSING: [401, 'missing x-api-key header'],
  API_KEY_INVALID: [401, 'invalid API key'],
  API_KEY_SCOPE: [403, 'this key is for the %s API'],
  API_KEY_OTHER_SCOPE: [401, 'invalid API key: this key is for the %s API'],
  ACCOUNT_NOT_FOUND: [404, 'account not found'],
  PROJECT_NOT_FOUND: [404, 'project not found'],
});

/** The Agents API (`/v1/agents`): agents, branches and their content, deployments (`builder/`). */
export const AGENTS = catalog('AGENTS', {
  AGENT_EXISTS: [409, 'an agent with that agentId exists', 'agentId', 'agentId already taken'],
  AGENT_ID_IS_SLUG: [409, 'another agent of this account has that slug', 'agentId', 'agentId is the slug of another agent'],
  AGENT_NOT_FOUND: [404, 'agent not found', 'agentId'],
  AGENT_OTHER_ACCOUNT: [403, 'this key has no access to that agent'],
  AGENT_OTHER_PROJECT: [403, 'this key is bound to another agent'],
  AGENT_CREATE_BOUND: [403, 'a key bound to one agent cannot create agents'],
  AGENT_LIMIT: [409, 'an account may have at most %s agents', 'agents', 'agent limit reached'],
  BRANCH_EXISTS: [409, 'a branch with that name exists', 'name'],
  BRANCH_NOT_FOUND: [404, 'branch not found', 'branch'],
  BRANCH_READ_ONLY: [409, 'the branch is merged and read-only', 'branch', 'branch already merged'],
  BRANCH_BUSY: [409, 'the branch is being changed concurrently; try again'],
  BRANCH_MERGING: [409, 'the branch is being merged; try again', 'branch', 'a merge of this branch is under way'],
  MERGE_INTO_MAIN: [400, 'main cannot be merged into itself', 'branchId'],
  BRANCH_MERGED: [409, 'the branch is already merged', 'branchId', 'branch already merged'],
  MERGE_UNDER_WAY: [409, 'the branch is being merged; try again', 'branchId', 'a merge of this branch is under way'],
  BRANCH_DIVERGED: [409, 'the branch has diverged from main'],
  BRANCH_TOO_LARGE: [400, 'a branch holds at most 8 MiB (8388608 bytes) of content: this change would make it %s bytes', 'branch', 'the branch would be larger than 8 MiB'],
  NAME_EXISTS: [409, '"%s" already exists on this branch', 'name', 'name already exists on this branch'],
  TOPIC_NOT_FOUND: [404, 'topic not found', 'topicId'],
  FUNCTION_NOT_FOUND: [404, 'function not found', 'name'],
  FUNCTION_UNPARSABLE: [400, 'code does not parse as one JavaScript function: %s', 'code'],
  ATTRIBUTE_NOT_FOUND: [404, 'attribute not found', 'attributeId'],
  ATTRIBUTE_UNKNOWN: [400, 'unknown attribute "%s" on this branch', 'attributeValues.values.%s'],
  VARIANT_NOT_FOUND: [404, 'variant not found', 'variantId'],
  CONFIG_NOT_FOUND: [404, 'real-time config not found', 'config'],
  CONFIG_BUSY: [409, 'the config is being changed concurrently; try again'],
  CONFIG_TOO_LARGE: [400, 'variables must be at most 256 KiB merged into the page: this patch would make it %s characters', 'variables', 'variables must be at most 256 KiB merged into the page'],
  PUBLISH_NOT_SANDBOX: [400, 'publish deploys to sandbox; promote a deployment to reach pre-release and live', 'environment'],
  DEPLOYMENT_NOT_FOUND: [404, 'deployment not found', 'deploymentId'],
  DEPLOYMENT_LIVE: [409, 'the deployment is already live; there is no environment to promote to', 'deploymentId', 'already in the last environment'],
  PROMOTE_BACKWARDS: [400, 'promote moves forward from %s', 'targetEnvironment'],
  TELEPHONY_CONNECTOR_NOT_FOUND: [404, 'telephony connector not found', 'connectorId'],
  TELEPHONY_CONNECTOR_UNKNOWN: [400, 'no telephony connector of this agent has this id', 'connector_id'],
  TELEPHONY_CONNECTOR_IN_USE: [409, 'phone numbers are bound to this connector; delete them first', 'connectorId'],
  TELEPHONY_NUMBER_NOT_FOUND: [404, 'phone number not found', 'phoneNumberId'],
  TELEPHONY_NUMBER_INVALID: [400, 'number must be a phone number in E.164 format, such as +14155550123', 'number'],
  TELEPHONY_NUMBER_EXISTS: [409, 'this number is already bound', 'number'],
  TELEPHONY_VARIANT_UNKNOWN: [400, 'no variant of this agent has this id', 'variant_id'],
});

/** The operator's admin API (`/admin/v1`): accounts, keys, connectors, settings, runtime introspection. */
export const ADMIN = catalog('ADMIN', {
  OPERATOR_TOKEN_INVALID: [401, 'missing or invalid operator token'],
  ACCOUNT_NOT_FOUND: [404, 'account not found', '%s'],
  SLUG_TAKEN: [409, 'slug already taken', 'slug'],
  PROJECT_NOT_FOUND: [404, 'project not found', 'project_id'],
  PROJECT_REQUIRED: [400, 'project_id is required for scope %s', 'project_id'],
  KEY_NOT_FOUND: [404, 'key not found', 'id'],
  HOST_REQUIRED: [400, 'host is required for messaging connectors', 'host'],
  CONNECTOR_NOT_FOUND: [404, 'connector not found', 'id'],
  ACTOR_NOT_FOUND: [404, 'actor not found', 'id'],
  MACHINE_NOT_FOUND: [404, 'no machine of that kind in the catalog', 'kind'],
  UPGRADE_REQUIRED: [400, 'expected a WebSocket upgrade (version 13)', 'upgrade'],
  CURSOR_MALFORMED: [400, 'malformed cursor', 'cursor'],
  OUTBOUND_FIELDS_KIND: [400, 'telephony_connector_id and from_number apply to outbound connectors only', '%s'],
  TELEPHONY_CONNECTOR_NOT_FOUND: [404, 'telephony connector not found for this project', 'telephony_connector_id'],
  FROM_NUMBER_INVALID: [400, 'from_number must be a phone number in E.164 format, such as +14155550123', 'from_number'],
  VARIANT_UNKNOWN: [400, 'no variant of this agent has this id (variants are defined on its main branch)', 'variant_id'],
  PROJECTION_NOT_FOUND: [404, 'projection not found', 'name'],
  WORKER_DIRECTORY_UNAVAILABLE: [503, 'the worker directory cannot be read now (%s); /healthz says what keeps this process from the workers'],
});

/** The Chat API (`/{version}/{account_id}/{project_id}/chat`). */
export const CHAT = catalog('CHAT', {
  VERSION_NOT_FOUND: [404, 'Chat API version %s not found'],
  CREDENTIALS_MISSING: [401, 'X-API-KEY and X-TOKEN are required'],
  API_KEY_INVALID: [401, 'invalid X-API-KEY'],
  TOKEN_INVALID: [401, 'invalid X-TOKEN'],
  API_KEY_OTHER_PROJECT: [401, 'X-API-KEY is not valid for this project'],
  TOKEN_OTHER_PROJECT: [401, 'X-TOKEN is not valid for this project'],
  VARIANT_UNKNOWN: [400, 'unknown variant_id', 'variant_id'],
  CONVERSATION_NOT_FOUND: [404, 'conversation not found'],
  CONVERSATION_ENDED: [409, 'the conversation has ended'],
  CONVERSATION_HANDED_OFF: [409, 'the conversation was handed off'],
  CONVERSATION_NOT_STARTED: [409, 'the conversation was not started'],
  CONVERSATION_EXISTS: [409, 'the conversation exists'],
  ATTRIBUTES_TOO_LARGE: [400, "integration_attributes would take the conversation's past %s bytes of JSON", 'integration_attributes'],
  TIMEOUT: [503, 'the conversation did not answer in time; retry'],
  RATE_LIMITED_KEY: [429, 'rate limit exceeded for this X-API-KEY; retry after the Retry-After header'],
  RATE_LIMITED_PROJECT: [429, 'rate limit exceeded for this project; retry after the Retry-After header'],
});

/** The Conversations API and its concurrency endpoint (`/{version}/{account_id}/{project_id}/conversations`). */
export const CONVERSATIONS = catalog('CONVERSATIONS', {
  VERSION_NOT_FOUND: [404, 'Conversations API version %s not found'],
  CONCURRENCY_VERSION_NOT_FOUND: [404, 'Concurrent Calls API version %s not found'],
  KEY_OTHER_PROJECT: [403, 'this key is not valid for this project'],
  KEY_NO_DATA_PERMISSION: [403, 'this key lacks the conversations_data permission'],
  TRANSCRIPTS_HIDDEN: [403, 'transcript and semantic search are off while the project hides its transcripts (show_transcripts)'],
  PARAM_REPEATED: [400, '%s may be given only once', '%s'],
  PARAM_NOT_BOOLEAN: [400, '%s must be true or false', '%s'],
  PARAM_NOT_INTEGER: [400, '%s must be an integer from %s to %s', '%s'],
  PARAM_NOT_ONE_OF: [400, '%s must be one of %s', '%s'],
  PARAM_TOO_LONG: [400, '%s is longer than %s characters', '%s'],
  PARAM_NOT_DATE_TIME: [400, '%s must be an ISO 8601 date-time', '%s'],
  PARAM_NOT_CALENDAR_DATE: [400, '%s is not a calendar date', '%s'],
  PARAM_REQUIRED: [400, '%s is required', '%s'],
  PARAM_NOT_ON_V1: [400, '%s is not available on v1; use v3', '%s'],
  PARAM_V3_ONLY: [400, '%s is available on v3 only', '%s'],
  LATENCY_NOT_ON_V1: [400, 'include_latency is not available on v1', 'include_latency'],
  MODES_EXCLUSIVE: [400, 'query_type and sample are mutually exclusive: at most one retrieval mode', 'sample'],
  QUERY_REQUIRED: [400, 'query is required with query_type', 'query'],
  QUERY_WITHOUT_TYPE: [400, 'query needs query_type', 'query'],
  TURN_TYPE_NOT_TRANSCRIPT: [400, 'turn_type applies to query_type=transcript only', 'turn_type'],
  RANGE_REQUIRED: [400, 'start_time and end_time are required with query_type or sample', '%s'],
  RANGE_REVERSED: [400, 'end_time must be after start_time', 'end_time'],
  RANGE_TOO_LONG: [400, 'end_time must be at most one week after start_time', 'end_time'],
  VARIANT_AMBIGUOUS: [400, 'only one of variant_id and variant_name may be given', 'variant_name'],
  CHANNELS_TOO_MANY: [400, 'at most 32 channels of up to 64 characters', 'channel'],
  LANGUAGE_INVALID: [400, 'language must be a language code such as en or en-GB', 'language'],
  SLICE_INVALID: [400, 'slice_by must be variant', 'slice_by'],
  SLICE_RESERVED: [501, 'slice_by=%s is reserved and not implemented'],
  CURSOR_MALFORMED: [400, 'malformed cursor', 'cursor'],
  CURSOR_OTHER_FILTERS: [400, 'cursor was issued for other filters', 'cursor'],
  CONVERSATION_NOT_FOUND: [404, 'conversation %s not found'],
  AUDIO_NOT_FOUND: [404, 'conversation %s has no audio'],
  AUDIO_NOT_READY: [404, 'the redacted audio of conversation %s is made when the call ends'],
  RANGE_NOT_SATISFIABLE: [416, 'range not satisfiable: the audio is %s bytes', 'Range'],
});

/** The External Events API (`/v1/external-events/webhook`) and the bridge-ended notification (`/internal/v1/agentic-dial/bridge-ended`). */
export const EXTERNAL_EVENTS = catalog('EXTERNAL_EVENTS', {
  API_KEY_MISSING: [401, 'missing X-Api-Key header'],
  API_KEY_INVALID: [401, 'invalid X-Api-Key'],
  API_KEY_OTHER_PROJECT: [401, 'X-Api-Key is not valid for this account and project'],
  PARAM_REQUIRED: [400, '%s is required'],
  PARAM_REPEATED: [400, '%s may be given only once'],
  PARAM_TOO_LONG: [400, '%s is longer than %s characters'],
  LOCATION_INVALID: [400, 'event_id_location must be one of headers, querystring, payload'],
  PATH_INVALID: [400, 'event_id_path must be a name or a dotted path of names'],
  PATH_CREDENTIAL: [400, 'event_id_path may not name a header that carries credentials (%s)'],
  CONTENT_TYPE_UNSUPPORTED: [400, 'Content-Type must be application/json, application/x-www-form-urlencoded, application/xml or text/plain'],
  BODY_TOO_LARGE: [400, 'body is larger than %s bytes'],
  BODY_MALFORMED: [400, 'body is not valid %s'],
  QUERY_MALFORMED: [400, 'the query string is not valid percent-encoded UTF-8'],
  BODY_TOO_DEEP: [400, 'body nests deeper than %s levels'],
  XML_DOCTYPE_REFUSED: [400, 'XML with a DOCTYPE or entity declarations is refused'],
  EVENT_ID_NOT_FOUND: [400, 'event id not found in %s at %s'],
  EVENT_ID_INVALID: [400, 'event id must be a string or number of 1 to %s characters without control characters'],
  TRANSIENT: [500, 'the event could not be processed now; retry with exponential backoff'],
  RATE_LIMITED: [429, 'rate limit exceeded for this project; retry after the Retry-After header'],
  BRIDGE_BODY_INVALID: [400, 'body must be a JSON object with conversation_id, bridge_duration_seconds and call_duration_seconds'],
  BRIDGE_FIELD_INVALID: [400, '%s must be %s'],
  BRIDGE_CONVERSATION_NOT_FOUND: [404, 'conversation not found'],
});

/** Outbound calling (`/v1/outbound-calling`, contract 4.5 and 7.3), answered as `{error_message}`. */
export const OUTBOUND = catalog('OUTBOUND', {
  TOKEN_MISSING: [401, 'missing X-Service-Auth-Token header'],
  TOKEN_INVALID: [401, 'invalid X-Service-Auth-Token'],
  NOT_OUTBOUND: [401, 'the connector of this token is not configured for outbound calling'],
  BODY_INVALID: [400, 'body must be a JSON object'],
  TO_NUMBER_REQUIRED: [400, 'to_number is required'],
  TO_NUMBER_INVALID: [400, 'to_number must be an E.164 number, or a national number with country_code'],
  COUNTRY_CODE_INVALID: [400, 'country_code must be an ISO 3166-1 alpha-2 code'],
  METADATA_NOT_OBJECT: [400, 'metadata must be an object of string values'],
  METADATA_NOT_STRING: [400, 'metadata value of %s must be a string'],
  METADATA_KEY_INVALID: [400, 'metadata key %s is not a valid SIP header name'],
  METADATA_KEY_RESERVED: [400, 'metadata key %s names a SIP header the platform sets itself'],
  METADATA_KEY_REPEATED: [400, 'metadata key %s repeats another key but for case: SIP header names are case-insensitive'],
  METADATA_VALUE_INVALID: [400, 'metadata value of %s must not contain line breaks or control characters'],
  METADATA_TOO_LARGE: [400, 'metadata in base64 must be under %s bytes'],
  ENCRYPTION_INVALID: [400, 'encryption must be one of %s'],
  PLACE_FAILED: [500, 'failed to place the call; retry with exponential backoff'],
  CALL_SID_INVALID: [400, 'invalid call sid format'],
  CALL_NOT_FOUND: [404, 'call sid unknown, or its status is no longer kept'],
  STATUS_FAILED: [500, 'retrieval failed; retry with exponential backoff'],
});

/** Webhook endpoints and their deliveries (`/v1/webhook-endpoints`, Alerts API keys; `actors/delivery/`). */
export const WEBHOOKS = catalog('WEBHOOKS', {
  ENDPOINT_NOT_FOUND: [404, 'webhook endpoint not found', 'id'],
  ENDPOINT_LIMIT: [409, 'an account may have at most %s webhook endpoints', 'url', 'webhook endpoint limit reached'],
  ENDPOINT_DISABLED: [409, 'the webhook endpoint is disabled', 'enabled'],
  URL_INVALID: [400, 'url must be an absolute http or https URL of at most %s characters', 'url'],
  URL_CREDENTIALS: [400, 'url must not carry a user name or password; send credentials in headers', 'url'],
  URL_UNRESOLVABLE: [400, 'the host of url does not resolve', 'url'],
  URL_PRIVATE: [400, 'url resolves to a loopback or private address', 'url'],
  DELIVERY_NOT_FOUND: [404, 'delivery not found', 'delivery_id'],
  DELIVERY_TIMEOUT: [503, 'the delivery did not answer in time; retry'],
  TEST_RATE_LIMITED: [429, 'too many test events for this endpoint; retry after the Retry-After header'],
  CURSOR_MALFORMED: [400, 'malformed cursor', 'cursor'],
  KEY_PROJECT_BOUND: [401, 'invalid API key for webhook endpoints: this key is bound to project %s, and webhook endpoints serve every project of the account; use an Alerts key issued without project_id'],
});

/** Alert rules and active alerts (`/v1/alert-rules`, `/v1/alerts`, Alerts API keys; `actors/alert-rule/`). */
export const ALERTS = catalog('ALERTS', {
  RULE_NOT_FOUND: [404, 'alert rule not found', 'id'],
  RULE_LIMIT: [409, 'an account may have at most %s alert rules', 'alert_rules', 'alert rule limit reached'],
  PROJECT_UNKNOWN: [422, 'project_id must be null or the id of a project of the account', 'project_id'],
  PROJECT_OTHER_THAN_KEY: [422, 'this key is bound to project %s: project_id must be that project', 'project_id'],
  MONITORING_UNAVAILABLE: [502, 'the rule could not be synced with the monitoring backend; retry'],
});

/** Every REST family's catalog, for the reference page and its test. */
export const REST_CATALOGS = { EDGE, AGENTS, ADMIN, CHAT, CONVERSATIONS, EXTERNAL_EVENTS, OUTBOUND, WEBHOOKS, ALERTS } as const;
