//! A thin JSON client for pamd's worker endpoints. A non-2xx answer is an
//! [`HttpError`] carrying pamd's `{"error": {"code", "message"}}` code.

use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::backoff::Failure;

/// A thin JSON client for the worker endpoints.
#[derive(Clone)]
pub(super) struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// A non-2xx answer.
#[derive(Debug)]
pub(super) struct HttpError {
    pub(super) status: u16,
    pub(super) code: String,
    pub(super) body: serde_json::Value,
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
        Ok(Api {
            base: opts.server.trim_end_matches('/').to_string(),
            token: opts.token.trim().to_string(),
            http: http
                .timeout(timeout)
                .connect_timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<Option<T>> {
        let resp = match req.bearer_auth(&self.token).send().await {
            Ok(r) => r,
            // A certificate problem retries forever like any other
            // failure; its log line says what is wrong and what to do.
            Err(e) => match pam_tls::explain(&e) {
                Some(why) => anyhow::bail!("{}: {why}; {}", self.base, pam_tls::CA_FILE_HINT),
                None => return Err(e.into()),
            },
        };
        let status = resp.status();
        if status.is_success() {
            if status == reqwest::StatusCode::NO_CONTENT || status == reqwest::StatusCode::ACCEPTED
            {
                return Ok(None);
            }
            return Ok(Some(resp.json().await?));
        }
        let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("").to_string();
        Err(HttpError {
            status: status.as_u16(),
            code,
            body,
        }
        .into())
    }

    pub(super) async fn post<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<Option<T>> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    pub(super) async fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await?
            .context("empty answer")
    }
}

pub(super) fn http_code(e: &anyhow::Error) -> Option<(u16, &str)> {
    e.downcast_ref::<HttpError>()
        .map(|h| (h.status, h.code.as_str()))
}

/// What kind of failure `e` is, for the retry schedule.
pub(super) fn failure(e: &anyhow::Error) -> Failure {
    Failure::of_status(http_code(e).map(|(status, _)| status))
}
