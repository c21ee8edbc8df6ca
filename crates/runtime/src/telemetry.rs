//! Logs through tracing (JSON or plain) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//! traces over OTLP. Without that variable nothing tries to export, so nothing complains.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Plain,
}

/// Keeps the tracer provider alive; dropping it flushes pending spans.
pub struct Telemetry(Option<SdkTracerProvider>);

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Installs the global subscriber. Must run inside the Tokio runtime (the OTLP exporter
/// needs it).
pub fn init(format: LogFormat, service_name: &'static str) -> anyhow::Result<Telemetry> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,kube=warn"));
    let provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()?;
            Some(
                SdkTracerProvider::builder()
                    .with_resource(Resource::builder().with_service_name(service_name).build())
                    .with_batch_exporter(exporter)
                    .build(),
            )
        }
        _ => None,
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service_name)));
    let registry = tracing_subscriber::registry().with(filter).with(otel);
    match format {
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json())
            .try_init()?,
        LogFormat::Plain => registry.with(tracing_subscriber::fmt::layer()).try_init()?,
    }
    Ok(Telemetry(provider))
}
