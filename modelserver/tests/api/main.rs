//! Each API shape the CLIs rely on, exercised over HTTP with reqwest.

mod anthropic;
mod gemini;
mod hold;
mod openai;
mod script;

use pam_model_server::{ModelServer, Script};
use serde_json::Value;

pub(crate) async fn start(script: Script) -> ModelServer {
    ModelServer::start(script).await.expect("server starts")
}

pub(crate) struct Sse {
    pub events: Vec<(Option<String>, Value)>,
}

impl Sse {
    pub fn parse(text: &str) -> Self {
        let mut events = Vec::new();
        for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            events.push((name, serde_json::from_str(&data).expect("data is JSON")));
        }
        Self { events }
    }

    pub fn names(&self) -> Vec<&str> {
        self.events
            .iter()
            .map(|(n, _)| n.as_deref().unwrap_or(""))
            .collect()
    }

    /// Data of every event with this name.
    pub fn named(&self, name: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|(n, _)| n.as_deref() == Some(name))
            .map(|(_, d)| d)
            .collect()
    }
}

pub(crate) async fn post(
    server: &ModelServer,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("request succeeds");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, response.text().await.expect("body"), content_type)
}
