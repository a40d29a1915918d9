//! A thin JSON client for pamd's worker endpoints. A non-2xx answer is an
//! [`HttpError`] carrying pamd's `{"error": {"code", "message"}}` code.

use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::backoff::Failure;

/// A thin JSON client for the worker endpoints.
///
/// `--server` may name several pamd replicas (comma-separated): requests
/// go to one of them; one that cannot be connected to is skipped at once
/// (the request was never sent), and after any other transport failure
/// (a timeout: a hung replica) the next request goes to the next one.
#[derive(Clone)]
pub(super) struct Api {
    bases: Vec<String>,
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    token: String,
    http: reqwest::Client,
}

/// The server URLs of a `--server` value: comma-separated, each without a
/// trailing `/`.
pub fn server_urls(server: &str) -> Vec<String> {
    server
        .split(',')
        .map(|s| s.trim().trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A non-2xx answer.
#[derive(Debug)]
pub(super) struct HttpError {
    pub(super) status: u16,
    pub(super) code: String,
    pub(super) body: serde_json::Value,
    /// `Retry-After` in seconds, when pamd sent one.
    pub(super) retry_after: Option<u64>,
}

/// How many times a request is sent at most while pamd answers 429.
const RATE_LIMIT_TRIES: u32 = 5;

/// How long to wait before retrying, when `e` is a 429.
fn rate_limited(e: &anyhow::Error) -> Option<Duration> {
    let h = e.downcast_ref::<HttpError>()?;
    (h.status == 429).then(|| Duration::from_secs(h.retry_after.unwrap_or(1).clamp(1, 60)))
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {} {}: {}", self.status, self.code, self.body)
    }
}
impl std::error::Error for HttpError {}

impl Api {
    pub(super) fn new(opts: &super::AgentOptions, timeout: Duration) -> anyhow::Result<Api> {
        let mut http = reqwest::Client::builder().use_rustls_tls();
        if let Some(certs) = &opts.ca_certs {
            // A CA file replaces the public roots (pam-tls's rule).
            http = http.tls_built_in_root_certs(false);
            for c in certs {
                http = http.add_root_certificate(c.clone());
            }
        }
        let bases = server_urls(&opts.server);
        anyhow::ensure!(!bases.is_empty(), "--server: no URL");
        Ok(Api {
            bases,
            current: Default::default(),
            token: opts.token.trim().to_string(),
            http: http
                .timeout(timeout)
                .connect_timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    /// Sends a request; a 429 (over this worker token's rate
    /// budget) is retried after its `Retry-After` (at most 60 s, a few
    /// times), then returned like any other answer.
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<Option<T>> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.send_once(method.clone(), path, body.clone()).await {
                Err(e) if tries < RATE_LIMIT_TRIES => match rate_limited(&e) {
                    Some(wait) => {
                        tracing::info!(
                            path,
                            wait_s = wait.as_secs(),
                            "rate limited by pamd; waiting"
                        );
                        tokio::time::sleep(wait).await;
                    }
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }

    async fn send_once<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<Option<T>> {
        use std::sync::atomic::Ordering;
        let first = self.current.load(Ordering::SeqCst);
        let n = self.bases.len();
        let mut last_err = None;
        for k in 0..n {
            let i = (first + k) % n;
            let base = &self.bases[i];
            let mut req = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .bearer_auth(&self.token);
            if let Some(b) = &body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(resp) => {
                    self.current.store(i, Ordering::SeqCst);
                    return answer(resp).await;
                }
                // A certificate problem retries forever like any other
                // failure; its log line says what is wrong and what to do.
                Err(e) => {
                    let connect = e.is_connect();
                    let err = match pam_tls::explain(&e) {
                        Some(why) => anyhow::anyhow!("{base}: {why}; {}", pam_tls::CA_FILE_HINT),
                        None => anyhow::Error::from(e),
                    };
                    if !connect {
                        // Maybe sent: never again here; the next request
                        // tries the next replica.
                        self.current.store((i + 1) % n, Ordering::SeqCst);
                        return Err(err);
                    }
                    last_err = Some(err);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no server")))
    }

    pub(super) async fn post<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<Option<T>> {
        let body = serde_json::to_value(body)?;
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// Opens a stream (the watch) at `last_id`: the 2xx
    /// response, whose body the caller reads, or the `101` of an upgraded
    /// watch; anything else is an
    /// [`HttpError`]. Goes to the server the last request went to; a
    /// failure moves the next one to the next server.
    pub(super) async fn open(
        &self,
        path: &str,
        last_id: Option<&str>,
    ) -> anyhow::Result<reqwest::Response> {
        use std::sync::atomic::Ordering;
        let i = self.current.load(Ordering::SeqCst) % self.bases.len();
        // The upgraded watch (pam_manifests::protocol::WATCH_UPGRADE):
        // pamd holds no HTTP buffers for it. A pamd or a proxy that does
        // not upgrade answers the plain stream.
        let mut req = self
            .http
            .get(format!("{}{path}", self.bases[i]))
            .bearer_auth(&self.token)
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(
                reqwest::header::UPGRADE,
                pam_manifests::protocol::WATCH_UPGRADE,
            )
            // pamd may ask for this host's logs on the upgraded watch.
            .header(
                pam_manifests::protocol::WATCH_SERVES,
                pam_manifests::protocol::WATCH_LOG_READ,
            );
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let next = || {
            self.current
                .store((i + 1) % self.bases.len(), Ordering::SeqCst)
        };
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                next();
                return Err(e.into());
            }
        };
        if resp.status().is_success() || resp.status() == reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Ok(resp);
        }
        if resp.status().is_server_error() {
            next();
        }
        match answer::<serde_json::Value>(resp).await {
            Err(e) => Err(e),
            Ok(_) => anyhow::bail!("{path}: unexpected answer"),
        }
    }

    pub(super) async fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> anyhow::Result<T> {
        self.send(reqwest::Method::GET, path, None)
            .await?
            .context("empty answer")
    }
}

/// A response as the worker reads it: 2xx JSON (or nothing), else an
/// [`HttpError`].
async fn answer<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
) -> anyhow::Result<Option<T>> {
    let status = resp.status();
    if status.is_success() {
        if status == reqwest::StatusCode::NO_CONTENT || status == reqwest::StatusCode::ACCEPTED {
            return Ok(None);
        }
        return Ok(Some(resp.json().await?));
    }
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    Err(HttpError {
        status: status.as_u16(),
        code,
        body,
        retry_after,
    }
    .into())
}

pub(super) fn http_code(e: &anyhow::Error) -> Option<(u16, &str)> {
    e.downcast_ref::<HttpError>()
        .map(|h| (h.status, h.code.as_str()))
}

/// What kind of failure `e` is, for the retry schedule.
pub(super) fn failure(e: &anyhow::Error) -> Failure {
    Failure::of_status(http_code(e).map(|(status, _)| status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, retry_after: Option<u64>) -> anyhow::Error {
        HttpError {
            status,
            code: String::new(),
            body: serde_json::Value::Null,
            retry_after,
        }
        .into()
    }

    #[test]
    fn a_429_waits_its_retry_after_bounded() {
        assert_eq!(
            rate_limited(&http(429, Some(3))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(rate_limited(&http(429, None)), Some(Duration::from_secs(1)));
        assert_eq!(
            rate_limited(&http(429, Some(0))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            rate_limited(&http(429, Some(3600))),
            Some(Duration::from_secs(60))
        );
        assert_eq!(rate_limited(&http(503, Some(3))), None);
        assert_eq!(rate_limited(&anyhow::anyhow!("refused")), None);
    }
}
