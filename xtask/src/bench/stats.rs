//! Percentiles of measured durations.

use std::time::Duration;

use serde_json::{Value, json};

/// p50, p95, p99 and max of a set of samples, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Self {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if ms.is_empty() {
                return 0.0;
            }
            // Nearest-rank percentile.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let rank = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len());
            ms[rank - 1]
        };
        Self {
            count: ms.len(),
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
            max: ms.last().copied().unwrap_or(0.0),
        }
    }

    pub fn to_json(self) -> Value {
        json!({"count": self.count, "p50_ms": round(self.p50), "p95_ms": round(self.p95), "p99_ms": round(self.p99), "max_ms": round(self.max)})
    }
}

pub fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_one_to_a_hundred() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let summary = Summary::of(&samples);
        assert_eq!(
            (summary.p50, summary.p95, summary.p99, summary.max),
            (50.0, 95.0, 99.0, 100.0)
        );
        assert_eq!(summary.count, 100);
    }

    #[test]
    fn no_samples_give_zeros() {
        assert_eq!(Summary::of(&[]), Summary::default());
    }
}
