import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  ALERT_RULE_KIND, alertRules, MAX_RULES_PER_ACCOUNT, ruleView, type AlertRuleRecord, type AlertRuleReply, type AlertRuleView, type RuleDefinition,
} from '../../../actors/alert-rule/mod.js';
import type { Runtime } from '../../../actors/mod.js';
import { ALERTS, PlatformError } from '../../../platform/errors.js';
import { newId } from '../../../platform/secrets.js';
import type { Services } from '../../../platform/services.js';
import { StoreDuplicateError } from '../../../store/mod.js';
import type { ApiKey } from '../../../tenancy/keys.js';
import { apiKeyAuth, resolvePathProject } from '../auth.js';
import { refuseRepeatedQuery, useErrorShape } from '../errors.js';
import { alertsErrorResponses } from '../schemas.js';
import { ActiveAlertView, CreateRuleBody, ListAlertsQuery, ListRulesQuery, RuleParams, RuleView, UpdateRuleBody } from './body.js';

export interface AlertsOptions {
  services: Services;
  runtime: Pick<Runtime, 'client'>;
  /** Rules per account (10). */
  maxRules?: number;
}

const fieldResponses = { 502: alertsErrorResponses[400], ...alertsErrorResponses };

/**
 * Alert rules (contract 2.3, 4.2, 7.2, 8) at `/v1/alert-rules` and the firing ones at `/v1/alerts`
 * (addendum): every route needs an `x-api-key` of scope `alerts` and sees only its account. A rule is an
 * actor (`actors/alert-rule`): create starts it, PATCH re-evaluates it, delete stops it; reads come from the
 * `alert_rules` record it writes with each of its snapshots. Errors in the Alerts shape `{message, errors}`.
 * A key issued with a `project_id` reaches only the rules of that project: the others (account-wide ones
 * included) are absent from its lists and not found when addressed, as another account's are.
 */
export const alertsPlugin: FastifyPluginAsync<AlertsOptions> = async (root, opts) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', apiKeyAuth(opts.services.keys, ['alerts'], { otherScope: 401 }));
  app.addHook('preValidation', refuseRepeatedQuery);
  const rules = alertRules(opts.services.store);
  const maxRules = opts.maxRules ?? MAX_RULES_PER_ACCOUNT;
  const tags = ['alerts'];

  /** Tells the rule's actor; 502 when it cannot be reached (its evaluator is the monitoring backend). */
  const tell = async (id: string, event: { type: string } & Record<string, unknown>): Promise<AlertRuleReply> => {
    try {
      return await opts.runtime.client.ask<AlertRuleReply>(ALERT_RULE_KIND, id, event);
    } catch (err) {
      if (err instanceof PlatformError) throw err;
      throw ALERTS.MONITORING_UNAVAILABLE();
    }
  };

  /**
   * 422 unless `projectId` is null or a project of the account; for a key bound to a project, unless it is
   * that project (null too: an account-wide rule watches every project). `undefined` (a PATCH that leaves
   * the project as it is) passes.
   */
  const checkProject = async (key: ApiKey, projectId: string | null | undefined) => {
    if (projectId === undefined) return;
    if (key.project_id !== null && projectId !== key.project_id) throw ALERTS.PROJECT_OTHER_THAN_KEY(key.project_id);
    if (projectId === null) return;
    const found = await resolvePathProject(opts.services, key.id, key.account_id, projectId).catch(() => null);
    if (!found || found.project.id !== projectId) throw ALERTS.PROJECT_UNKNOWN();
  };

  /** The rule, when the key reaches it: of its account, and of its project for a bound key; else 404. */
  const ruleOf = async (key: ApiKey, id: string): Promise<AlertRuleRecord> => {
    const rule = await rules.get(id);
    if (!rule || rule.account_id !== key.account_id) throw ALERTS.RULE_NOT_FOUND();
    if (key.project_id !== null && rule.project_id !== key.project_id) throw ALERTS.RULE_NOT_FOUND();
    return rule;
  };

  /**
   * The store filter of a list: the account's rules, narrowed to the key's project for a bound key; null when
   * the `project_id` asked for is another project (a bound key sees none of its rules).
   */
  const scopeOf = (key: ApiKey, projectId: string | undefined): Record<string, unknown> | null => {
    if (key.project_id !== null && projectId !== undefined && projectId !== key.project_id) return null;
    const filter: Record<string, unknown> = { account_id: key.account_id };
    const project = key.project_id ?? projectId;
    if (project !== undefined) filter.project_id = project;
    return filter;
  };

  app.post('/alert-rules', {
    schema: { tags, summary: 'Create an alert rule; it is evaluated at once and then on its schedule', body: CreateRuleBody, response: { 201: RuleView, ...fieldResponses } },
  }, async (req, reply) => {
    const key = req.apiKey!;
    await checkProject(key, req.body.project_id);
    const now = new Date();
    const at = now.toISOString();
    const definition: RuleDefinition = req.body;
    for (;;) {
      const taken = new Set((await rules.find({ account_id: key.account_id })).map((r) => r.slot));
      const slot = [...Array(maxRules).keys()].find((s) => !taken.has(s));
      if (slot === undefined) throw ALERTS.RULE_LIMIT(maxRules);
      const record: AlertRuleRecord = {
        id: newId('ar'), account_id: key.account_id, slot, ...definition,
        current_state: 'ok', created_at: at, updated_at: at, since: null, last_evaluated_at: null, current_value: null, snapshot_version: 0,
      };
      try {
        await rules.insert(record);
      } catch (err) {
        if (err instanceof StoreDuplicateError) continue;
        throw err;
      }
      try {
        const told = await tell(record.id, { type: 'CREATE', account_id: key.account_id, rule: definition, at: now.getTime() });
        return reply.code(201).send(told.rule ?? ruleView(record));
      } catch (err) {
        // Not started: the slot is given back.
        await rules.delete({ id: record.id }).catch(() => undefined);
        throw err;
      }
    }
  });

  app.get('/alert-rules', {
    schema: { tags, summary: "List the account's alert rules (no pagination)", querystring: ListRulesQuery, response: { 200: z.object({ data: z.array(RuleView) }), ...fieldResponses } },
  }, async (req) => {
    const q = req.query;
    const filter = scopeOf(req.apiKey!, q.project_id);
    if (!filter) return { data: [] };
    if (q.enabled !== undefined) filter.enabled = q.enabled === 'true';
    if (q.metric !== undefined) filter.metric = q.metric;
    if (q.state !== undefined) filter.current_state = q.state;
    const rows = await rules.find(filter, { sort: { created_at: 1 } });
    return { data: rows.map(ruleView) };
  });

  app.get('/alert-rules/:rule_id', {
    schema: { tags, summary: 'Read an alert rule', params: RuleParams, response: { 200: RuleView, ...fieldResponses } },
  }, async (req) => ruleView(await ruleOf(req.apiKey!, req.params.rule_id)));

  app.patch('/alert-rules/:rule_id', {
    schema: { tags, summary: 'Change any of name, project_id, metric, operator, threshold_value, window_duration, enabled; the rule is evaluated again at once', params: RuleParams, body: UpdateRuleBody, response: { 200: RuleView, ...fieldResponses } },
  }, async (req) => {
    const key = req.apiKey!;
    await ruleOf(key, req.params.rule_id);
    await checkProject(key, req.body.project_id);
    const told = await tell(req.params.rule_id, { type: 'UPDATE', changes: req.body, at: Date.now() });
    if (!told.rule) throw ALERTS.RULE_NOT_FOUND();
    return told.rule satisfies AlertRuleView;
  });

  app.delete('/alert-rules/:rule_id', {
    schema: { tags, summary: 'Delete an alert rule (its evaluations stop)', params: RuleParams, response: { 204: z.null(), ...fieldResponses } },
  }, async (req, reply) => {
    const key = req.apiKey!;
    await ruleOf(key, req.params.rule_id);
    await tell(req.params.rule_id, { type: 'DELETE', at: Date.now() });
    await rules.delete({ id: req.params.rule_id, account_id: key.account_id });
    return reply.code(204).send(null);
  });

  app.get('/alerts', {
    schema: { tags, summary: 'List the active alerts: the enabled rules now in state alert', querystring: ListAlertsQuery, response: { 200: z.object({ data: z.array(ActiveAlertView) }), ...fieldResponses } },
  }, async (req) => {
    // A disabled rule keeps its last state but watches nothing: it is no active alert.
    const filter = scopeOf(req.apiKey!, req.query.project_id);
    if (!filter) return { data: [] };
    filter.current_state = 'alert';
    filter.enabled = true;
    if (req.query.metric !== undefined) filter.metric = req.query.metric;
    const rows = await rules.find(filter, { sort: { since: 1 } });
    return {
      data: rows.map((r) => ({
        alert_rule_id: r.id, name: r.name, project_id: r.project_id, metric: r.metric, operator: r.operator, threshold_value: r.threshold_value,
        window_duration: r.window_duration, since: r.since, last_evaluated_at: r.last_evaluated_at, current_value: r.current_value,
      })),
    };
  });
};
