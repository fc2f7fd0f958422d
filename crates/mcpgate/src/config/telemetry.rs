//! `[telemetry]`: OpenTelemetry tracing over OTLP/HTTP. Off unless the section is present.

use anyhow::bail;
use mcpgate_telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

use super::check;

/// `[telemetry]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    /// The OTLP/HTTP (protobuf) traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub(super) otlp_endpoint: String,
    /// The `service.name` of the traces. Default `mcpgate`.
    #[serde(default = "default_service_name")]
    pub(super) service_name: String,
    /// The share of requests traced when the client sent no sampling decision (a client's
    /// `traceparent` flag is followed). Default 1.0.
    #[serde(default = "default_sample_ratio")]
    pub(super) sample_ratio: f64,
}

fn default_sample_ratio() -> f64 {
    1.0
}

fn default_service_name() -> String {
    "mcpgate".into()
}

impl RawTelemetry {
    /// The endpoint and the ratio checked.
    pub(super) fn validate(self) -> anyhow::Result<TelemetryConfig> {
        check::url("telemetry.otlp_endpoint", &self.otlp_endpoint)?;
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            bail!("telemetry.sample_ratio must be between 0.0 and 1.0");
        }
        Ok(TelemetryConfig {
            otlp_endpoint: self.otlp_endpoint,
            service_name: self.service_name,
            sample_ratio: self.sample_ratio,
        })
    }
}
