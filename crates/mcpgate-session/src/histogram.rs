//! A latency histogram that records with three relaxed atomic additions: no lock, so a
//! request never waits on another session's request to be counted (prometheus-client's
//! own histogram takes a lock per observation). Rendered as a classic Prometheus
//! histogram.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Bucket upper bounds in seconds: 100 µs × 2.5ⁿ, up to ~93 s (then `+Inf`).
const BOUNDS: [f64; 16] = {
    let mut b = [0.0; 16];
    let mut v = 0.0001;
    let mut i = 0;
    while i < 16 {
        b[i] = v;
        v *= 2.5;
        i += 1;
    }
    b
};

#[derive(Debug, Default)]
struct Inner {
    /// Per-bucket (not cumulative) counts; the last is `+Inf`.
    buckets: [AtomicU64; 17],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

/// A shared handle: clones record into the same histogram.
#[derive(Debug, Default, Clone)]
pub(crate) struct Latency(Arc<Inner>);

impl Latency {
    /// Records one duration.
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| secs <= *b).unwrap_or(16);
        self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.0.count.fetch_add(1, Ordering::Relaxed);
    }
}

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets = [(0.0, 0u64); 17];
        for (i, slot) in buckets.iter_mut().enumerate() {
            *slot = (
                BOUNDS.get(i).copied().unwrap_or(f64::INFINITY),
                self.0.buckets[i].load(Ordering::Relaxed),
            );
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::registry::Registry;

    #[test]
    fn renders_as_a_prometheus_histogram() {
        let fam: Family<Vec<(String, String)>, Latency> = Family::default();
        let h = fam
            .get_or_create(&vec![("method".into(), "ping".into())])
            .clone();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(2));
        h.observe(Duration::from_secs(500));
        let mut reg = Registry::default();
        reg.register("lat", "latency", fam);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(out.contains("# TYPE lat histogram"), "{out}");
        assert!(out.contains(r#"lat_count{method="ping"} 3"#), "{out}");
        assert!(
            out.contains(r#"lat_bucket{le="0.0001",method="ping"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"lat_bucket{le="+Inf",method="ping"} 3"#),
            "{out}"
        );
        assert!(out.contains(r#"lat_sum{method="ping"} 500.00205"#), "{out}");
    }
}
