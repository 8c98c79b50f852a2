//! Routers and listeners: the core service, the result port and one
//! listener per 3D channel, all over one [`App`].
//!
//! Every router carries [`HttpServerLayer`]: each request gets a server
//! span that continues the caller's W3C trace context and records the
//! `idgate.journey_ref` baggage, so a call through the gateway is one trace
//! down to the sandbox.

use axum::serve::ListenerExt as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::admin;
use super::app::App;
use super::clock::Clock;
use super::config::SandboxConfig;
use super::error::{SandboxError, message_response};
use super::faults;
use super::handle::{SandboxChannelInfo, SandboxHandle, Server};
use super::ops::{Route, serve};
use super::webhook;
use crate::domain::Operation;
use crate::telemetry::HttpServerLayer;

/// The service root path of every operation.
pub const SERVICE_ROOT: &str = "/service/captcha";

/// Entry point of the sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Sandbox;

impl Sandbox {
    /// Binds every listener, starts serving and returns once all are bound,
    /// so callers can use the URLs at once.
    pub async fn start(
        config: SandboxConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<SandboxHandle, SandboxError> {
        validate(&config)?;
        let target = webhook::Target::from_config(&config.webhook)?;
        let app = Arc::new(App::new(config, clock));
        for rule in &app.config.faults {
            faults::validate(rule, &app.channel_names())?;
            app.faults.add(rule.clone());
        }
        let (shutdown, _) = watch::channel(false);

        let core = bind("core", &app.config.listen.core).await?;
        let result = bind("result", &app.config.listen.result).await?;
        let mut channel_listeners = Vec::with_capacity(app.channels.len());
        for ch in &app.channels {
            let name = format!("channel {}", ch.config.name);
            channel_listeners.push(bind(&name, &ch.config.listen).await?);
        }

        let mut servers = vec![
            spawn(core, core_router(app.clone()), &shutdown),
            spawn(result, result_router(app.clone()), &shutdown),
        ];
        let mut channels = Vec::with_capacity(channel_listeners.len());
        for (index, listener) in channel_listeners.into_iter().enumerate() {
            let server = spawn(listener, channel_router(app.clone(), index), &shutdown);
            let config = &app.channels[index].config;
            channels.push(SandboxChannelInfo {
                name: config.name.clone(),
                vendor: config.vendor.clone(),
                base_url: format!("http://{}", server.addr),
            });
            servers.push(server);
        }
        let driver = match target {
            Some(target) => {
                let client = webhook::client()?;
                Some(tokio::spawn(webhook::drive(
                    app.clone(),
                    target,
                    client,
                    shutdown.subscribe(),
                )))
            }
            None => None,
        };
        tracing::info!(
            core = %servers[0].addr,
            result = %servers[1].addr,
            channels = channels.len(),
            "sandbox listening"
        );
        Ok(SandboxHandle::new(app, servers, channels, driver, shutdown))
    }
}

fn validate(config: &SandboxConfig) -> Result<(), SandboxError> {
    if config.channels.is_empty() {
        return Err(SandboxError::Config("at least one 3D channel is required"));
    }
    let mut names: Vec<&str> = config.channels.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.len() != config.channels.len() {
        return Err(SandboxError::Config("channel names must be unique"));
    }
    let path_safe = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    };
    if !names.iter().all(|n| path_safe(n)) {
        return Err(SandboxError::Config("channel names must be [A-Za-z0-9_-]+"));
    }
    if config.operators.is_empty() {
        return Err(SandboxError::Config("at least one operator is required"));
    }
    Ok(())
}

async fn bind(listener: &str, addr: &str) -> Result<TcpListener, SandboxError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| SandboxError::Bind {
            listener: listener.to_owned(),
            source,
        })
}

fn spawn(listener: TcpListener, router: Router, shutdown: &watch::Sender<bool>) -> Server {
    // A listener that cannot report its address was never bound.
    let addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
    let (stop, _) = watch::channel(false);
    let mut global = shutdown.subscribe();
    let mut own = stop.subscribe();
    let signal = async move {
        tokio::select! {
            _ = global.wait_for(|s| *s) => {}
            _ = own.wait_for(|s| *s) => {}
        }
    };
    let task: JoinHandle<()> = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener.tap_io(crate::net::no_delay), router)
            .with_graceful_shutdown(signal)
            .await
        {
            tracing::warn!(error = %e, "sandbox listener stopped with an error");
        }
    });
    Server {
        addr,
        stop,
        task: Some(task),
    }
}

fn not_found() -> Response {
    message_response(StatusCode::NOT_FOUND, "no such operation")
}

fn op_route(app: &Arc<App>, route: Route, channel: Option<usize>) -> axum::routing::MethodRouter {
    let app = app.clone();
    post(move |req: Request| serve(app.clone(), route, channel, req))
}

fn three_d(router: Router, prefix: &str, app: &Arc<App>, channel: usize) -> Router {
    router
        .route(
            &format!("{prefix}/3d/session-token"),
            op_route(app, Route::Op(Operation::SessionToken3D), Some(channel)),
        )
        .route(
            &format!("{prefix}/3d/liveness"),
            op_route(app, Route::Op(Operation::Liveness3D), Some(channel)),
        )
}

fn named_channel(app: &Arc<App>, op: Operation) -> axum::routing::MethodRouter {
    let app = app.clone();
    post(move |Path(name): Path<String>, req: Request| {
        let app = app.clone();
        async move {
            match app.channel_index(&name) {
                Some(index) => serve(app, Route::Op(op), Some(index), req).await,
                None => not_found(),
            }
        }
    })
}

/// Every operation but the result; the first channel at the standard 3D
/// paths, every channel under `/channels/{name}`; the admin API.
fn core_router(app: Arc<App>) -> Router {
    let r = SERVICE_ROOT;
    let router = Router::new()
        .route(
            &format!("{r}/credencial"),
            op_route(&app, Route::Op(Operation::Credential), None),
        )
        .route(
            &format!("{r}/appkey"),
            op_route(&app, Route::Op(Operation::Appkey), None),
        )
        .route(
            &format!("{r}/challenge"),
            op_route(&app, Route::Op(Operation::Challenge), None),
        )
        .route(
            &format!("{r}/captcha"),
            op_route(&app, Route::Op(Operation::Captcha), None),
        )
        .route(
            &format!("{r}/document"),
            op_route(&app, Route::Document, None),
        )
        .route(
            &format!("{r}/channels/{{name}}/3d/session-token"),
            named_channel(&app, Operation::SessionToken3D),
        )
        .route(
            &format!("{r}/channels/{{name}}/3d/liveness"),
            named_channel(&app, Operation::Liveness3D),
        );
    three_d(router, r, &app, 0)
        .nest("/_sandbox", admin::router(app.clone()))
        .fallback(|| async { not_found() })
        .layer(HttpServerLayer::new())
}

/// Only the result operation.
fn result_router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            &format!("{SERVICE_ROOT}/document/result"),
            op_route(&app, Route::Op(Operation::Result), None),
        )
        .fallback(|| async { not_found() })
        .layer(HttpServerLayer::new())
}

/// One channel's own listener: the standard 3D paths.
fn channel_router(app: Arc<App>, channel: usize) -> Router {
    three_d(Router::new(), SERVICE_ROOT, &app, channel)
        .fallback(|| async { not_found() })
        .layer(HttpServerLayer::new())
}
