//! # mcpgate-telemetry
//!
//! OpenTelemetry tracing for mcpgate, and nothing else: the OTLP exporter and the
//! `tracing` layer that turns the gateway's request spans into OpenTelemetry spans
//! ([`Telemetry::start`], [`Telemetry::layer`]), and W3C trace-context propagation —
//! a client's `traceparent` becomes the parent of its request's span ([`set_parent`]), and
//! every upstream request carries the gateway's own span as its parent ([`inject`]).
//!
//! Off unless configured. Off, [`set_parent`] and [`inject`] return after one relaxed
//! atomic load, and the gateway's spans stay disabled (they are `debug` spans that no
//! layer asks for), so tracing costs nothing on the request path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ON: AtomicBool = AtomicBool::new(false);
/// The share of requests traced without a client decision, in millionths.
static RATIO_PPM: AtomicU64 = AtomicU64::new(1_000_000);
/// Requests that had no client decision, for the deterministic 1-in-N choice.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// Why tracing could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (a bad endpoint, say).
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// Where traces go.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub otlp_endpoint: String,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The share of traces recorded (0.0–1.0) when the client sent no sampling decision;
    /// a client's `traceparent` sampled flag is followed.
    pub sample_ratio: f64,
}

/// A running exporter; [`Telemetry::shutdown`] flushes what is buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Telemetry {
    /// Builds the exporter (batched, on its own thread) and switches propagation on. Call
    /// it outside an async runtime (the exporter's HTTP client is a blocking one).
    pub fn start(cfg: &TelemetryConfig) -> Result<Self, TelemetryError> {
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(&cfg.otlp_endpoint)
            .with_timeout(std::time::Duration::from_secs(5))
            .with_headers(Default::default())
            .build()
            .map_err(TelemetryError::Exporter)?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(cfg.service_name.clone())
            .build();
        // Which requests are traced is decided before their spans exist ([`sampled`]): a
        // span that is not wanted is then never built, which is most of what tracing
        // costs. What reaches the SDK is recorded (or follows the client's decision).
        let sampler = opentelemetry_sdk::trace::Sampler::ParentBased(Box::new(
            opentelemetry_sdk::trace::Sampler::AlwaysOn,
        ));
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ppm = (cfg.sample_ratio.clamp(0.0, 1.0) * 1_000_000.0).round() as u64;
        RATIO_PPM.store(ppm, Ordering::Relaxed);
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(sampler)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("mcpgate");
        ON.store(true, Ordering::Release);
        Ok(Telemetry { provider, tracer })
    }

    /// The `tracing` layer exporting mcpgate's spans (only spans, only mcpgate's: log
    /// events are not copied into traces).
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer;
        // No per-span extras that cost on every poll or span: busy/idle time (two clock
        // reads per enter and exit of an instrumented future), thread and source location
        // attributes.
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                m.is_span() && m.target().starts_with("mcpgate")
            }))
    }

    /// Exports what is still buffered (bounded) and stops. Call it outside an async
    /// runtime.
    pub fn shutdown(self) {
        ON.store(false, Ordering::Release);
        if let Err(e) = self.provider.shutdown() {
            eprintln!("mcpgate: trace export did not finish: {e}");
        }
    }
}

/// Whether tracing is on.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Whether the request with these headers is to be traced: always when tracing is off (its
/// span is then the `debug` span of the logs, disabled unless debug logging is on); else
/// the client's `traceparent` sampled flag when it sent one, and otherwise
/// `sample_ratio` of the requests (every ⌈1/ratio⌉-th, without randomness). Create the
/// request's span only when this says so.
pub fn sampled(headers: &http::HeaderMap) -> bool {
    if !enabled() {
        return true;
    }
    if let Some(flags) = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().rsplit('-').next())
        .and_then(|f| u8::from_str_radix(f, 16).ok())
    {
        return flags & 1 == 1;
    }
    let ppm = RATIO_PPM.load(Ordering::Relaxed);
    if ppm >= 1_000_000 {
        return true;
    }
    let n = SEEN.fetch_add(1, Ordering::Relaxed);
    (n + 1) * ppm / 1_000_000 > n * ppm / 1_000_000
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// Makes `span` a child of the trace the client's `traceparent` (and `tracestate`) names,
/// when tracing is on and the client sent one. A malformed `traceparent` is ignored (the
/// span starts a trace of its own).
pub fn set_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    if !enabled() || span.is_disabled() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    let _ = span.set_parent(cx);
}

/// Writes the current span's trace context (`traceparent`, `tracestate`) into the headers
/// of an upstream request, replacing any there, when tracing is on.
pub fn inject(headers: &mut http::HeaderMap) {
    if !enabled() {
        return;
    }
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    let cx = span.context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(headers));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sampling_follows_the_client_else_the_ratio() {
        let h = |tp: &str| {
            let mut h = http::HeaderMap::new();
            h.insert("traceparent", http::HeaderValue::from_str(tp).unwrap());
            h
        };
        // Off: every request keeps its (disabled) span.
        assert!(sampled(&http::HeaderMap::new()));
        let t = Telemetry::start(&TelemetryConfig {
            otlp_endpoint: "http://127.0.0.1:9/v1/traces".into(),
            service_name: "test".into(),
            sample_ratio: 0.25,
        })
        .unwrap();
        let none = http::HeaderMap::new();
        let n = (0..100).filter(|_| sampled(&none)).count();
        assert_eq!(n, 25, "a quarter of the requests without a client decision");
        let yes = h("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let no = h("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!((0..10).all(|_| sampled(&yes)), "the client's sampled flag");
        assert!(
            (0..10).all(|_| !sampled(&no)),
            "the client's decision not to"
        );
        t.shutdown();
        assert!(!enabled());
    }
}
