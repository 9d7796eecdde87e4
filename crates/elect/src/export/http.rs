//! `--http ADDR`: the leader over HTTP, for sidecar consumers and probes.
//!
//! - `GET /leader`: JSON with `name` (the field the old Kubernetes
//!   leader-elector sidecar served), `leader`, `token`, `is_self`, `since`;
//!   503 while the view is not current, so nobody reads a stale leader as
//!   fresh.
//! - `GET /healthz`: 200 while in contact with the backend.
//! - `GET /readyz`: 200 only while this process leads (before its
//!   deadline), so a Kubernetes Service can route to the leader alone.
//! - `GET /metrics`: Prometheus text format (see [`super::metrics`]).
//!
//! Handlers only read the latest [`Exported`] state; they never wait on
//! the backend.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
#[cfg(feature = "metrics")]
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

#[cfg(feature = "metrics")]
use super::metrics::Metrics;
#[cfg(not(feature = "metrics"))]
use super::no_metrics::Metrics;
use super::view::{Context, Exported};
use crate::clock::BootInstant;
use crate::error::{Error, Result};

/// Binds `--http` before anything else starts, so a taken port fails the
/// command at once, before it campaigns.
///
/// # Errors
/// [`Error::Io`] when the address cannot be bound.
///
/// # Cancel safety
/// Cancel safe.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|source| Error::Io {
        action: format!("--http: cannot listen on {addr}"),
        source,
    })
}

#[derive(Clone)]
struct Shared {
    state: watch::Receiver<Exported>,
    metrics: Arc<Metrics>,
    ctx: Arc<Context>,
}

/// Serves until the task is dropped or aborted.
///
/// # Cancel safety
/// Dropping the future stops serving; requests in flight are cut.
pub async fn serve(
    listener: TcpListener,
    state: watch::Receiver<Exported>,
    metrics: Arc<Metrics>,
    ctx: Context,
) {
    let shared = Shared {
        state,
        metrics,
        ctx: Arc::new(ctx),
    };
    let app = Router::new()
        .route("/leader", get(leader))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    #[cfg(feature = "metrics")]
    let app = app.route("/metrics", get(metrics_text));
    let app = app.with_state(shared);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!("--http server stopped: {e}");
    }
}

#[derive(serde::Serialize)]
struct LeaderBody<'a> {
    /// The leader's id, or "" when nobody leads.
    name: &'a str,
    leader: Option<&'a str>,
    token: Option<u64>,
    is_self: bool,
    /// When this process first saw the current leader (RFC 3339).
    since: Option<String>,
    backend: crate::backend_kind::Backend,
    election: &'a str,
    /// Whether this candidate's health check passes (with a check only).
    #[serde(skip_serializing_if = "Option::is_none")]
    healthy: Option<bool>,
}

async fn leader(State(shared): State<Shared>) -> Response {
    let exported = shared.state.borrow().clone();
    let s = &exported.leadership;
    if !s.current {
        let body = serde_json::json!({
            "error": "contact with the backend is lost: the leader is not known",
            "backend": shared.ctx.backend,
            "election": shared.ctx.election,
        });
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    let body = LeaderBody {
        name: s.leader.as_deref().unwrap_or(""),
        leader: s.leader.as_deref(),
        token: s.token,
        is_self: s.is_self,
        since: exported.since.map(rfc3339),
        backend: shared.ctx.backend,
        election: &shared.ctx.election,
        healthy: exported.healthy,
    };
    axum::Json(body).into_response()
}

async fn healthz(State(shared): State<Shared>) -> (StatusCode, &'static str) {
    if shared.state.borrow().leadership.current {
        (StatusCode::OK, "connected\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "contact with the backend is lost\n",
        )
    }
}

async fn readyz(State(shared): State<Shared>) -> (StatusCode, &'static str) {
    if shared
        .state
        .borrow()
        .leadership
        .leads_at(BootInstant::now())
    {
        (StatusCode::OK, "leading\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not leading\n")
    }
}

#[cfg(feature = "metrics")]
async fn metrics_text(State(shared): State<Shared>) -> Response {
    let current = shared.state.borrow().leadership.clone();
    let text = shared.metrics.render(&current, BootInstant::now());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}
