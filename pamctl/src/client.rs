//! The HTTP client for `/api/v1` (docs/api.md): bearer token, JSON bodies,
//! and the mapping from what went wrong to an exit code and a hint.

use std::time::Duration;

use serde_json::Value;

use crate::config::{Resolved, TokenSource};
use crate::error::{CliError, Exit, Result};

/// How many times one call is sent at most (the first try included) when
/// pamd asks to retry or the answer was lost.
const RETRIES: u32 = 30;
/// Of which answers 503 with `Retry-After`: a few, so a
/// database down for long is reported rather than waited out.
const UNAVAILABLE_RETRIES: u32 = 5;

/// An answer's `Retry-After`, in seconds (the form pamd sends).
fn retry_after_secs(r: &reqwest::blocking::Response) -> Option<u64> {
    r.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// How to start a local pamd; shown when nothing answers.
pub const START_HINT: &str =
    "is pamd running? start it with `pamd --local-worker` (or point --server / PAM_SERVER at one)";

#[derive(Clone)]
pub struct Client {
    http: reqwest::blocking::Client,
    /// For event streams: no overall timeout (a stream is long-lived).
    stream_http: reqwest::blocking::Client,
    /// pamd replicas (`--server a,b`): a request goes to the first that
    /// can be connected to (one that cannot never got the request).
    bases: Vec<String>,
    /// The one that answered last.
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    token: Option<String>,
    token_source: TokenSource,
    data_dir: std::path::PathBuf,
}

impl Client {
    pub fn new(resolved: &Resolved) -> Result<Client> {
        // A large apply is one transaction; give it time.
        Client::with_timeout(resolved, Duration::from_secs(600))
    }

    /// A client whose requests give up after `timeout` (completion asks
    /// the server with a short one).
    pub fn with_timeout(resolved: &Resolved, timeout: Duration) -> Result<Client> {
        let bases: Vec<String> = resolved
            .server
            .split(',')
            .map(|s| s.trim().trim_end_matches('/').to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if bases.is_empty() {
            return Err(CliError::usage("--server: no URL"));
        }
        for b in &bases {
            check_scheme(b)?;
        }
        let ca = resolved.ca_file.as_deref();
        let http = http_client(Some(timeout), ca)?;
        // Event streams stay open for as long as the caller reads them.
        let stream_http = http_client(None, ca)?;
        Ok(Client {
            http,
            stream_http,
            bases,
            current: Default::default(),
            token: resolved.token.clone(),
            token_source: resolved.token_source.clone(),
            data_dir: resolved.data_dir.clone(),
        })
    }

    /// The names of the objects of `kind` (for completion); none when
    /// the list fails.
    pub fn names(&self, kind: pam_manifests::Kind, project: Option<&str>) -> Vec<String> {
        self.list(kind, project, None)
            .unwrap_or_default()
            .iter()
            .filter_map(|o| {
                o.pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
            })
            .map(str::to_string)
            .collect()
    }

    /// Lists objects of `kind` (`project: None` = every project)
    /// matching the label `selector`.
    pub fn list(
        &self,
        kind: pam_manifests::Kind,
        project: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<Value>> {
        let path = format!(
            "{}{}",
            crate::collection_path(kind, project),
            query(&[("labelSelector", selector)])
        );
        items(self.get(&path)?)
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        self.send(reqwest::Method::GET, path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.send(reqwest::Method::POST, path, Some(body))
    }

    pub fn delete(&self, path: &str) -> Result<Value> {
        self.send(reqwest::Method::DELETE, path, None)
    }

    /// GET that returns `None` on 404 instead of an error.
    pub fn get_optional(&self, path: &str) -> Result<Option<Value>> {
        match self.send(reqwest::Method::GET, path, None) {
            Ok(body) => Ok(Some(body)),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens `GET path` as an event stream (docs/api.md, "Event stream"),
    /// resuming after `last_event_id` when given.
    pub fn open_stream(
        &self,
        path: &str,
        last_event_id: Option<i64>,
    ) -> Result<reqwest::blocking::Response> {
        let resp = self.each_server(|base| {
            let mut req = self
                .stream_http
                .get(format!("{base}{path}"))
                .header("accept", "text/event-stream");
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            if let Some(id) = last_event_id {
                req = req.header("last-event-id", id.to_string());
            }
            req.send()
        })?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        let body = resp
            .text()
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        Err(self.status_error(&reqwest::Method::GET, path, status, body))
    }

    /// Opens `GET path` for its body's bytes, as they come (a run's log,
    /// its transcript): no overall timeout. An answer `503` with
    /// `Retry-After` — `log_elsewhere` (another replica holds the watch
    /// of the run's host), `worker_unavailable`, `unavailable` — is asked
    /// of the next server at once, and after each round of them all
    /// again once the wait it asked for passed, a few rounds at most.
    pub fn open_bytes(&self, path: &str) -> Result<reqwest::blocking::Response> {
        use std::sync::atomic::Ordering;
        let n = self.bases.len() as u32;
        let mut tries = 0;
        loop {
            let resp = self.each_server(|base| {
                let mut req = self.stream_http.get(format!("{base}{path}"));
                if let Some(t) = &self.token {
                    req = req.bearer_auth(t);
                }
                req.send()
            })?;
            let status = resp.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(resp);
            }
            let retry = retry_after_secs(&resp);
            let body = resp
                .text()
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            tries += 1;
            match retry {
                Some(wait) if status == 503 && tries < UNAVAILABLE_RETRIES * n => {
                    let next = (self.current.load(Ordering::SeqCst) + 1) % self.bases.len();
                    self.current.store(next, Ordering::SeqCst);
                    if tries % n == 0 {
                        std::thread::sleep(Duration::from_secs(wait.clamp(1, 10)));
                    }
                }
                _ => return Err(self.status_error(&reqwest::Method::GET, path, status, body)),
            }
        }
    }

    /// Sends one request. A POST carries a fresh `Idempotency-Key`,
    /// the same on each of this call's retries: on another
    /// server (failover), after an answer lost on the way (the
    /// connection dropped), while pamd says the first is still in
    /// progress, and after a 429 (waiting its `Retry-After`) — so a
    /// retried mutation is done once. At most [`RETRIES`] tries.
    fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let key = (method == reqwest::Method::POST).then(|| uuid::Uuid::new_v4().to_string());
        let mut tries = 0;
        let mut unavailable = 0;
        let resp = loop {
            tries += 1;
            let sent = self.each_server_raw(|base| {
                let mut req = self.http.request(method.clone(), format!("{base}{path}"));
                if let Some(t) = &self.token {
                    req = req.bearer_auth(t);
                }
                if let Some(k) = &key {
                    req = req.header("idempotency-key", k);
                }
                if let Some(b) = body {
                    req = req.json(b);
                }
                req.send()
            });
            let retry_after = match &sent {
                // Over the rate limit: wait as told, any method.
                Ok(r) if r.status().as_u16() == 429 => {
                    let wait = retry_after_secs(r).unwrap_or(1).clamp(1, 60);
                    crate::term::note(&format!("pamd: rate limited; retrying in {wait}s"));
                    Some(Duration::from_secs(wait))
                }
                // The answer was lost (not a timeout: that waited long
                // enough): the key makes sending again safe.
                Err((_, e)) if key.is_some() && !e.is_connect() && !e.is_timeout() => {
                    Some(Duration::from_secs(1))
                }
                // The database cannot serve now (down, or a lock held by
                // a stopped replica): wait as told. Only where a
                // retry cannot do twice what the first did: reads, and
                // POSTs (their key).
                Ok(r)
                    if r.status().as_u16() == 503
                        && (key.is_some() || method == reqwest::Method::GET)
                        && unavailable < UNAVAILABLE_RETRIES
                        && retry_after_secs(r).is_some() =>
                {
                    unavailable += 1;
                    let wait = retry_after_secs(r).unwrap_or(1).clamp(1, 10);
                    crate::term::note(&format!("pamd: unavailable; retrying in {wait}s"));
                    Some(Duration::from_secs(wait))
                }
                Ok(r) if key.is_some() && r.status().as_u16() == 409 => {
                    retry_after_secs(r).map(|s| Duration::from_secs(s.clamp(1, 10)))
                }
                _ => None,
            };
            match retry_after {
                Some(wait) if tries < RETRIES => std::thread::sleep(wait),
                _ => break sent.map_err(|(base, e)| self.transport_error(&base, &e))?,
            }
        };
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .map_err(|e| self.transport_error(self.base(), &e))?;
        let parsed: Option<Value> = if text.trim().is_empty() {
            Some(Value::Null)
        } else {
            serde_json::from_str(&text).ok()
        };
        if (200..300).contains(&status) {
            return match parsed {
                Some(body) => Ok(body),
                None => Err(CliError::new(
                    Exit::ServerError,
                    format!("{method} {path}: the server answered {status} with a body that is not JSON"),
                )),
            };
        }
        Err(self.status_error(&method, path, status, parsed.unwrap_or(Value::Null)))
    }

    /// The server that answered last (the first before any).
    fn base(&self) -> &str {
        &self.bases[self.current.load(std::sync::atomic::Ordering::SeqCst) % self.bases.len()]
    }

    /// Sends with `send` to the servers in turn, from the one that answered
    /// last, moving on only when one cannot be connected to.
    fn each_server(
        &self,
        send: impl Fn(&str) -> reqwest::Result<reqwest::blocking::Response>,
    ) -> Result<reqwest::blocking::Response> {
        self.each_server_raw(send)
            .map_err(|(base, e)| self.transport_error(&base, &e))
    }

    /// [`Client::each_server`] with the transport error as it came.
    fn each_server_raw(
        &self,
        send: impl Fn(&str) -> reqwest::Result<reqwest::blocking::Response>,
    ) -> std::result::Result<reqwest::blocking::Response, (String, reqwest::Error)> {
        use std::sync::atomic::Ordering;
        let n = self.bases.len();
        let first = self.current.load(Ordering::SeqCst);
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            match send(&self.bases[i]) {
                Ok(resp) => {
                    self.current.store(i, Ordering::SeqCst);
                    return Ok(resp);
                }
                Err(e) if e.is_connect() && k + 1 < n => last = Some(e),
                Err(e) => return Err((self.bases[i].clone(), e)),
            }
        }
        let e = last.expect("at least one server");
        Err((self.bases[first % n].clone(), e))
    }

    fn transport_error(&self, base: &str, e: &reqwest::Error) -> CliError {
        let mut source: Option<&dyn std::error::Error> = Some(e);
        let mut chain = Vec::new();
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        let root = chain.last().cloned().unwrap_or_default();
        if let Some(why) = pam_tls::explain(e) {
            return CliError::new(Exit::Unreachable, format!("{}: {why}", base))
                .hint(pam_tls::CA_FILE_HINT);
        }
        if e.is_timeout() {
            return CliError::new(Exit::Unreachable, format!("{}: timed out ({root})", base))
                .hint(START_HINT);
        }
        if e.is_connect() || e.is_request() {
            return CliError::new(
                Exit::Unreachable,
                format!("cannot reach the server at {}: {root}", base),
            )
            .hint(START_HINT)
            .hint("or point pamctl elsewhere with --server, PAM_SERVER or a context in ~/.config/pam/config.yaml");
        }
        CliError::new(Exit::Unreachable, format!("{}: {}", base, chain.join(": ")))
    }

    fn status_error(
        &self,
        method: &reqwest::Method,
        path: &str,
        status: u16,
        body: Value,
    ) -> CliError {
        let code = body
            .pointer("/error/code")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{method} {path}"));
        let exit = if status >= 500 {
            Exit::ServerError
        } else {
            Exit::Refused
        };
        let code_part = if code.is_empty() {
            String::new()
        } else {
            format!(" {code}")
        };
        let mut err = CliError::new(exit, format!("{status}{code_part}: {message}"));
        err.status = Some(status);
        if let Some(errors) = body.get("errors").and_then(Value::as_array) {
            err.details = errors
                .iter()
                .map(|e| {
                    e.get("display")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| e.to_string())
                })
                .collect();
        }
        match status {
            401 => {
                let admin = self.data_dir.join("admin.token");
                let why = match &self.token_source {
                    TokenSource::None => "no token was sent".to_string(),
                    TokenSource::Flag => "the --token was refused".to_string(),
                    TokenSource::Env => "the PAM_TOKEN was refused".to_string(),
                    TokenSource::Context(c) => format!("the token of context {c:?} was refused"),
                    TokenSource::AdminFile(p) => format!("the token in {} was refused", p.display()),
                };
                err.hints.push(format!(
                    "{why}; pass --token or set PAM_TOKEN; a local pamd writes {}",
                    admin.display()
                ));
            }
            403 if self.token.as_deref().is_some_and(|t| t.starts_with("pamw_")) => err
                .hints
                .push("worker tokens (pamw_…) cannot call operator endpoints; use an operator token (pam_…)".into()),
            // A token's role or projects: `whoami` says which.
            403 => err.hints.push(
                "the token's role does not allow this; `pamctl whoami` shows its role and projects, `pamctl auth can-i VERB KIND` what it may do".into(),
            ),
            409 if code == "conflict" => err
                .hints
                .push("re-read the object (`pamctl get … -o yaml`) and apply again".into()),
            409 if code == "field_conflict" => err.hints.push(
                "pass --force-conflicts to take the fields, or change them where their manager sets them (a Source's manifests)".into(),
            ),
            _ => {}
        }
        err
    }
}

/// Refuses a server URL this pamctl cannot speak to: no scheme (a bare
/// `host:port`), or one other than `http://` and `https://`.
fn check_scheme(server: &str) -> Result<()> {
    if server.starts_with("http://") || server.starts_with("https://") {
        return Ok(());
    }
    match server.split_once("://") {
        None => Err(CliError::usage(format!("server {server:?} has no scheme"))
            .hint(format!("use http://{server}"))),
        Some((scheme, _)) => Err(CliError::usage(format!(
            "server {server:?}: pamctl speaks http:// and https://, not {scheme}://"
        ))),
    }
}

/// Percent-encodes a query value or path segment.
pub fn enc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The `items` of a list answer.
pub fn items(body: Value) -> Result<Vec<Value>> {
    match body {
        Value::Object(mut m) => match m.remove("items") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(CliError::new(
                Exit::ServerError,
                "the list answer has no `items` array",
            )),
        },
        _ => Err(CliError::new(
            Exit::ServerError,
            "the list answer is not an object",
        )),
    }
}

/// `?a=1&b=2` from the pairs whose value is set (empty string when none).
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", enc(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A blocking HTTP client with pamctl's connect timeout and user agent,
/// trusting `ca_file` (else the bundled roots); `timeout: None` for
/// streams that stay open.
fn http_client(
    timeout: Option<Duration>,
    ca_file: Option<&std::path::Path>,
) -> Result<reqwest::blocking::Client> {
    pam_tls::blocking_builder(ca_file)
        .map_err(|e| {
            CliError::usage(e).hint("--ca-file, PAM_CA_FILE or a context's ca-file names it")
        })?
        .connect_timeout(Duration::from_secs(10))
        .timeout(timeout)
        .user_agent(concat!("pamctl/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            CliError::new(
                Exit::Unreachable,
                format!("cannot build the HTTP client: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        check_scheme("http://127.0.0.1:7700").unwrap();
        let e = check_scheme("127.0.0.1:7811").unwrap_err();
        assert_eq!(e.message, "server \"127.0.0.1:7811\" has no scheme");
        assert_eq!(e.hints, ["use http://127.0.0.1:7811"]);
        check_scheme("https://pam.example.com").unwrap();
        let e = check_scheme("ftp://pam.example.com").unwrap_err();
        assert_eq!(
            e.message,
            "server \"ftp://pam.example.com\": pamctl speaks http:// and https://, not ftp://"
        );
    }

    #[test]
    fn query_encodes_selectors() {
        assert_eq!(
            query(&[
                ("labelSelector", Some("app=web,tier in (a, b)")),
                ("phase", None)
            ]),
            "?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2C%20b%29"
        );
        assert_eq!(query(&[("x", None)]), "");
    }
}
