//! The admission webhook measured as its own process: cold start (process start to
//! `/readyz` answering over TLS), and admission latency and requests per second at
//! several concurrencies, sent to it directly over keep-alive TLS connections, and sent
//! through kube-apiserver as dry-run creates (with and without the webhook
//! configurations, so the webhook's share of an API request shows).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::https::{TlsClient, admission_review};

use super::cluster::{Bench, NAMESPACE, wait_until};
use super::stats::Summary;
use crate::local_webhook::LocalWebhook;

/// The concurrencies every route is measured at.
pub const CONCURRENCY: [usize; 3] = [1, 16, 64];

/// How admission requests reach the webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Straight to the webhook over TLS, as kube-apiserver's client does.
    Direct,
    /// Dry-run creates through kube-apiserver, which calls both webhooks.
    ApiServer,
    /// The same dry-run creates with no webhook configured: the API server's own share.
    ApiServerWithoutWebhook,
}

impl Route {
    pub fn label(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::ApiServer => "through the API server",
            Self::ApiServerWithoutWebhook => "API server, no webhook",
        }
    }
}

pub struct Load {
    pub route: Route,
    pub concurrency: usize,
    pub latency: Summary,
    pub per_second: f64,
}

pub struct WebhookFigures {
    /// Process start to the first `/readyz` 200 over TLS.
    pub cold_start: Duration,
    pub loads: Vec<Load>,
}

/// Requests sent per route and concurrency.
pub struct Requests {
    pub direct: usize,
    pub api_server: usize,
}

pub async fn measure(bin_dir: &Path, requests: &Requests) -> anyhow::Result<WebhookFigures> {
    let bench = Bench::start(Options::default()).await?;
    let webhook = LocalWebhook::spawn(&bench.plane, bin_dir)?;
    let cold_start = webhook.wait_ready(Duration::from_secs(30)).await?;
    let mut loads = Vec::new();

    let client = TlsClient::new(webhook.ca.cert_pem())?;
    for concurrency in CONCURRENCY {
        let latency = direct(&client, &webhook, concurrency, requests.direct).await?;
        loads.push(latency.into_load(Route::Direct, concurrency));
    }

    // The same dry-run creates with both configurations in place, then with none.
    for (route, configured) in [
        (Route::ApiServer, true),
        (Route::ApiServerWithoutWebhook, false),
    ] {
        if configured {
            webhook.register(&bench.client).await?;
        } else {
            LocalWebhook::unregister(&bench.client).await?;
        }
        wait_until(
            Duration::from_secs(30),
            "webhook configurations in effect",
            || defaulted(&bench.client, configured),
        )
        .await?;
        for concurrency in CONCURRENCY {
            let latency = dry_runs(&bench.client, concurrency, requests.api_server).await?;
            loads.push(latency.into_load(route, concurrency));
        }
    }
    Ok(WebhookFigures { cold_start, loads })
}

/// Per-request latencies and the wall time of one run.
struct Run {
    samples: Vec<Duration>,
    wall: Duration,
}

impl Run {
    fn into_load(self, route: Route, concurrency: usize) -> Load {
        #[allow(clippy::cast_precision_loss)]
        let per_second = self.samples.len() as f64 / self.wall.as_secs_f64().max(1e-9);
        Load {
            route,
            concurrency,
            latency: Summary::of(&self.samples),
            per_second,
        }
    }
}

/// `total` reviews over `concurrency` keep-alive connections, each sending its share
/// back to back, alternating the validating and the mutating path.
async fn direct(
    client: &TlsClient,
    webhook: &LocalWebhook,
    concurrency: usize,
    total: usize,
) -> anyhow::Result<Run> {
    let body = admission_review(
        "bench",
        "CREATE",
        &json!({"engine": "mongodb", "version": "7.0", "storage": "10Gi", "replicas": 3}),
    );
    let paths = LocalWebhook::paths()?;
    let mut connections = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let mut connection = client.connect(webhook.addr()).await?;
        // One request first, so the handshake is not in the figures.
        connection.review(&paths[0], &body).await?;
        connections.push(connection);
    }
    let started = Instant::now();
    let per_connection = total.div_ceil(concurrency);
    let runs = futures::future::try_join_all(connections.into_iter().map(|mut connection| {
        let (body, paths) = (&body, &paths);
        async move {
            let mut samples = Vec::with_capacity(per_connection);
            for path in paths.iter().cycle().take(per_connection) {
                let sent = Instant::now();
                let (status, answer) = connection.review(path, body).await?;
                samples.push(sent.elapsed());
                if status != 200 || answer["response"]["allowed"] != true {
                    bail!("the webhook answered {status}: {answer}");
                }
            }
            anyhow::Ok(samples)
        }
    }))
    .await?;
    Ok(Run {
        wall: started.elapsed(),
        samples: runs.into_iter().flatten().collect(),
    })
}

fn databases(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &kube::api::ApiResource::erase::<database_api::Database>(&()),
    )
}

fn database(name: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": name},
        "spec": {"engine": "postgres", "version": "16.4", "storage": "10Gi"},
    }))?)
}

const DRY_RUN: PostParams = PostParams {
    dry_run: true,
    field_manager: None,
};

/// Whether a dry-run create comes back with the label the mutating webhook adds,
/// matching `expected` (the API server learns of configurations through an informer).
async fn defaulted(client: &Client, expected: bool) -> bool {
    let Ok(object) = database("probe") else {
        return false;
    };
    databases(client)
        .create(&DRY_RUN, &object)
        .await
        .is_ok_and(|created| {
            created
                .labels()
                .contains_key(database_api::constants::labels::NAME)
                == expected
        })
}

/// `total` dry-run creates, `concurrency` at a time. Dry runs pass admission and
/// validation but store nothing, so every request is the same work.
async fn dry_runs(client: &Client, concurrency: usize, total: usize) -> anyhow::Result<Run> {
    let api = databases(client);
    let object = database("bench-dry-run")?;
    let started = Instant::now();
    let samples: Vec<Duration> = futures::stream::iter(0..total)
        .map(|_| {
            let (api, object) = (&api, &object);
            async move {
                let sent = Instant::now();
                api.create(&DRY_RUN, object)
                    .await
                    .context("dry-run create")?;
                anyhow::Ok(sent.elapsed())
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok(Run {
        wall: started.elapsed(),
        samples,
    })
}
