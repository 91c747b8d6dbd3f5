import { z } from 'zod';

/** The error body of the Agents, Alerts and admin families (contract section 7). */
export const FieldErrorBody = z.object({
  message: z.string(),
  errors: z.array(z.object({ field: z.string(), message: z.string() })),
});

/** Error responses every `fields`-shaped route may give, for the OpenAPI document. */
export const fieldErrorResponses = {
  400: FieldErrorBody,
  401: FieldErrorBody,
  403: FieldErrorBody,
  404: FieldErrorBody,
  409: FieldErrorBody,
  422: FieldErrorBody,
};

/**
 * Error responses of the Alerts family's routes (alert rules, alerts, webhook endpoints): its table (contract
 * 7.2) has no 403, a key of another scope is a 401.
 */
export const alertsErrorResponses = {
  400: FieldErrorBody,
  401: FieldErrorBody,
  404: FieldErrorBody,
  409: FieldErrorBody,
  422: FieldErrorBody,
};

/** Path ids: letters, digits, `_`, `-` and `.`, 1 to 128. Anything else is a malformed id (422). */
export const PathId = z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, 'malformed id');

/**
 * A branch in a path (`{branch}`): its id or its name, which may hold spaces, slashes and any other printable
 * character (percent-encoded in the path: `winter%20sale`, `a%2Fb`); blank or with control characters it is malformed.
 */
export const BranchRef = z.string().regex(/^(?=[^]*\S)[^\u0000-\u001f\u007f]{1,128}$/u, 'malformed branch');

/**
 * A branch's name as a body gives it (the contract: a string): 1 to 100 characters, not blank, no control
 * characters; so every name is also a `BranchRef`, and any branch is addressable by name or id in paths.
 */
export const BRANCH_NAME = /^(?=[^]*\S)[^\u0000-\u001f\u007f]{1,100}$/u;

/** Any JSON object (free-form values such as real-time config variables). */
export const JsonObject = z.record(z.string(), z.unknown());
