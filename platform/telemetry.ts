/**
 * OpenTelemetry traces. A tracer provider starts only when the standard OTEL variables configure an
 * exporter (`OTEL_TRACES_EXPORTER=otlp`, or an OTLP endpoint); otherwise every call here goes to the API's
 * no-op implementation and the SDK is never loaded. Spans are made by hand where work crosses a boundary
 * (edge request, actor ask, actor handling, responder, sandbox function), with no auto-instrumentation.
 * Trace context travels between processes as W3C `traceparent`/`tracestate` message headers.
 */
import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';

export { SpanKind, SpanStatusCode, context, trace, type Context, type Span };

/** The tracer of every Switchboard span (a no-op until `startTelemetry` registers a provider). */
export const tracer = trace.getTracer('switchboard');

type Env = Record<string, string | undefined>;

/** Whether the environment asks for traces to be exported (the standard OTEL variables). */
export function tracingConfigured(env: Env = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  if (exporters.includes('none')) return false;
  if (exporters.includes('otlp')) return true;
  return !!(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** A started tracer provider. */
export interface Telemetry {
  /** Exports what is pending and stops. */
  shutdown(): Promise<void>;
}

let started: Telemetry | null = null;

/** Whether a tracer provider runs in this process: edges add their per-request hooks only then. */
export const tracingStarted = (): boolean => started !== null;

/**
 * Starts the tracer provider when the environment configures an exporter: OTLP over HTTP (JSON), batched
 * (`OTEL_BSP_*`), service name `OTEL_SERVICE_NAME` (default `switchboard`), W3C trace context propagation.
 * Returns null (and loads nothing) when tracing is off.
 */
export async function startTelemetry(o: { env?: Env; attributes?: Attributes } = {}): Promise<Telemetry | null> {
  const env = o.env ?? process.env;
  if (started) return started;
  if (!tracingConfigured(env)) return null;
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (protocol && protocol !== 'http/json') {
    process.stderr.write(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: traces are sent as OTLP/HTTP JSON\n`);
  }
  // The exporter reads the endpoint, headers, timeout and compression from the OTEL_EXPORTER_OTLP_* variables.
  const exporter = new OTLPTraceExporter();
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || 'switchboard', ...o.attributes }),
    // Its schedule delay, queue and batch sizes come from the OTEL_BSP_* variables.
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  // The AsyncLocalStorage context manager and the W3C trace context + baggage propagators.
  provider.register();
  started = {
    shutdown: async () => {
      try {
        await provider.shutdown();
      } catch {
        // An unreachable collector must not keep the process from stopping.
      }
    },
  };
  return started;
}

/** W3C trace context of the active span as message headers, or undefined when there is nothing to carry. */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent ? carrier : undefined;
}

/** The context that message (or HTTP) headers carry, on top of the root context (a new trace without them). */
export function contextFromHeaders(headers: Record<string, string | string[] | undefined> | undefined): Context {
  if (!headers) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, headers, {
    keys: (h) => Object.keys(h),
    get: (h, key) => h[key],
  });
}

/**
 * Runs `fn` in a new active span: ended when `fn` settles, marked as an error (with the exception) when
 * it throws. `fn` may add attributes (an outcome) to the span.
 */
export function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  // No tracer provider: the API's no-op tracer would make a non-recording span, a context and two closures
  // per call for nothing (several calls per chat turn).
  if (started === null) return fn(NON_RECORDING);
  const run = (span: Span) =>
    fn(span).then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
        span.end();
        throw err;
      },
    );
  const opts = { kind: options.kind, attributes: options.attributes };
  return options.parent ? tracer.startActiveSpan(name, opts, options.parent, run) : tracer.startActiveSpan(name, opts, run);
}

/** The span `inSpan` hands out while no tracer provider runs: records nothing, as the no-op tracer's. */
const NON_RECORDING: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Loggers bound to a span's ids already (a request's logger); their children inherit from them. */
const boundLoggers = new WeakSet<object>();

/** Marks a logger (and so its children) as carrying `trace_id` and `span_id` in its bindings. */
export function markTraced<L extends object>(logger: L): L {
  boundLoggers.add(logger);
  return logger;
}

/**
 * `trace_id` and `span_id` of the active span, for log lines (pino `mixin`); empty when no span is active
 * or the logger (a pino child inherits from its parent) already carries them.
 */
export function traceFields(_merge?: object, _level?: number, logger?: object): Record<string, string> {
  for (let l = logger; l; l = Object.getPrototypeOf(l)) if (boundLoggers.has(l)) return {};
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId };
}
