import { z } from 'zod';
import type { DeliveryRecord, WebhookEndpointRecord } from '../../../actors/delivery/mod.js';

/** A webhook endpoint as the API shows it (never its signing secret, except once: `EndpointWithSecret`). */
export const EndpointView = z.object({
  id: z.string(),
  name: z.string(),
  url: z.string(),
  event_types: z.array(z.string()),
  headers: z.record(z.string(), z.string()),
  timeout_ms: z.number().int(),
  enabled: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The creation and rotate-secret answers: the endpoint and its signing secret, shown this once. */
export const EndpointWithSecret = EndpointView.extend({ signing_secret: z.string() });

export function endpointView(e: WebhookEndpointRecord): z.infer<typeof EndpointView> {
  return { id: e.id, name: e.name, url: e.url, event_types: e.event_types, headers: e.headers, timeout_ms: e.timeout_ms, enabled: e.enabled, created_at: e.created_at, updated_at: e.updated_at };
}

const AttemptView = z.object({
  series: z.number().int(),
  attempt: z.number().int(),
  started_at: z.string(),
  ended_at: z.string(),
  duration_ms: z.number(),
  response_status: z.number().int().nullable(),
  error: z.string().nullable(),
  error_detail: z.string().nullable(),
  next_attempt_at: z.string().nullable(),
});

/** One delivery of the log. */
export const DeliveryView = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  project_id: z.string().nullable(),
  status: z.enum(['pending', 'delivering', 'succeeded', 'failed']),
  created_at: z.string(),
  updated_at: z.string(),
  next_attempt_at: z.string().nullable(),
  attempt_count: z.number().int(),
  attempts: z.array(AttemptView),
});

export function deliveryView(d: DeliveryRecord): z.infer<typeof DeliveryView> {
  return {
    id: d.id,
    endpoint_id: d.endpoint_id,
    event_id: d.event_id,
    event_type: d.event_type,
    project_id: d.project_id,
    status: d.status,
    created_at: d.created_at,
    updated_at: d.updated_at,
    next_attempt_at: d.next_attempt_at,
    attempt_count: d.attempt_count,
    attempts: d.attempts,
  };
}
