//! A small OIDC issuer for the tests: discovery, JWKS, an
//! authorization endpoint that redirects back at once with a code, and a
//! token endpoint that checks the code (one use) and the PKCE verifier and
//! answers an ES256-signed ID token made with a key this process made
//! (ring). What it answers can be bent per test ([`Bend`]) to play a
//! broken or hostile issuer; [`Browser`] follows the sign-in by hand
//! (no redirects followed, cookies carried explicitly).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub const CLIENT_ID: &str = "pam-dashboard";
pub const CLIENT_SECRET: &str = "s3cret-client-value";
/// `[oidc] redirect_url` of the tests' pamd.
pub const REDIRECT_URL: &str = "http://pamd.test/auth/callback";

/// How the issuer misbehaves (default: not at all).
#[derive(Clone, Debug, Default)]
pub struct Bend {
    /// The discovery document's body, instead of the real one.
    pub discovery: Option<Vec<u8>>,
    /// The JWKS body, instead of the real one.
    pub jwks: Option<Vec<u8>>,
    /// Claims set over (null: removed from) the ID token's.
    pub claims: Value,
    /// Signed with another key (same kid).
    pub other_key: bool,
    /// The header's kid.
    pub kid: Option<String>,
    /// The id_token as is, instead of a signed one.
    pub raw_id_token: Option<String>,
    /// The token endpoint's whole answer (status, body).
    pub token_answer: Option<(u16, Value)>,
    /// The groups of the user signing in.
    pub groups: Vec<String>,
    /// The ID token's exp, seconds after pamd's now (`now` below).
    pub exp_in: i64,
}

struct Code {
    nonce: String,
    challenge: String,
    redirect_uri: String,
}

struct Inner {
    url: String,
    key_der: Vec<u8>,
    other_der: Vec<u8>,
    jwk: Value,
    codes: HashMap<String, Code>,
    bend: Bend,
    /// The time the ID token's iat/exp are counted from: pamd's clock.
    now: i64,
    /// Codes redeemed and answered (for replay checks).
    tokens_issued: usize,
}

/// The running issuer.
#[derive(Clone)]
pub struct Issuer {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

fn new_key() -> (EcdsaKeyPair, Vec<u8>) {
    let rng = SystemRandom::new();
    let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("a P-256 key")
        .as_ref()
        .to_vec();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).unwrap();
    (key, der)
}

impl Issuer {
    /// Serves on a free loopback port; `now` is pamd's time (unix
    /// seconds) the tokens are dated by.
    pub async fn start(now: i64) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (key, key_der) = new_key();
        let (_, other_der) = new_key();
        let point = key.public_key().as_ref().to_vec(); // 0x04 || x || y
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "k1",
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        });
        let inner = Arc::new(Mutex::new(Inner {
            url: url.clone(),
            key_der,
            other_der,
            jwk,
            codes: HashMap::new(),
            bend: Bend {
                exp_in: 3600,
                ..Bend::default()
            },
            now,
            tokens_issued: 0,
        }));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Issuer { url, inner }
    }

    /// Sets how the issuer misbehaves from now on.
    pub fn bend(&self, f: impl FnOnce(&mut Bend)) {
        let mut i = self.inner.lock().unwrap();
        let mut b = Bend {
            exp_in: 3600,
            ..Bend::default()
        };
        f(&mut b);
        i.bend = b;
    }

    /// pamd's clock moved.
    pub fn set_now(&self, now: i64) {
        self.inner.lock().unwrap().now = now;
    }

    pub fn tokens_issued(&self) -> usize {
        self.inner.lock().unwrap().tokens_issued
    }
}

async fn discovery(State(st): State<Arc<Mutex<Inner>>>) -> Response {
    let i = st.lock().unwrap();
    if let Some(body) = i.bend.discovery.clone() {
        return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    }
    let u = &i.url;
    Json(json!({
        "issuer": u,
        "authorization_endpoint": format!("{u}/authorize"),
        "token_endpoint": format!("{u}/token"),
        "jwks_uri": format!("{u}/jwks"),
        "response_types_supported": ["code"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
    .into_response()
}

async fn jwks(State(st): State<Arc<Mutex<Inner>>>) -> Response {
    let i = st.lock().unwrap();
    if let Some(body) = i.bend.jwks.clone() {
        return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    }
    Json(json!({ "keys": [i.jwk.clone()] })).into_response()
}

/// Signs the user in at once: back to the redirect URI with a code.
async fn authorize(
    State(st): State<Arc<Mutex<Inner>>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut i = st.lock().unwrap();
    let (Some(redirect), Some(state)) = (q.get("redirect_uri"), q.get("state")) else {
        return (StatusCode::BAD_REQUEST, "redirect_uri and state").into_response();
    };
    if q.get("code_challenge_method").map(String::as_str) != Some("S256")
        || q.get("client_id").map(String::as_str) != Some(CLIENT_ID)
    {
        return (StatusCode::BAD_REQUEST, "PKCE S256 and the client id").into_response();
    }
    let code = b64(&Sha256::digest(format!("{state}{}", i.codes.len())));
    i.codes.insert(
        code.clone(),
        Code {
            nonce: q.get("nonce").cloned().unwrap_or_default(),
            challenge: q.get("code_challenge").cloned().unwrap_or_default(),
            redirect_uri: redirect.clone(),
        },
    );
    let mut to = reqwest::Url::parse(redirect).unwrap();
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", state);
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_string())]).into_response()
}

/// The code (one use, its PKCE verifier checked) for an ID token.
async fn token(
    State(st): State<Arc<Mutex<Inner>>>,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let mut i = st.lock().unwrap();
    let field = |k: &str| f.get(k).cloned().unwrap_or_default();
    let Some(code) = i.codes.remove(&field("code")) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    };
    let verifier_ok = b64(&Sha256::digest(field("code_verifier").as_bytes())) == code.challenge;
    if !verifier_ok
        || field("client_id") != CLIENT_ID
        || field("client_secret") != CLIENT_SECRET
        || field("redirect_uri") != code.redirect_uri
        || field("grant_type") != "authorization_code"
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    }
    i.tokens_issued += 1;
    let b = i.bend.clone();
    if let Some((status, body)) = b.token_answer {
        return (StatusCode::from_u16(status).unwrap(), Json(body)).into_response();
    }
    if let Some(raw) = b.raw_id_token {
        return Json(json!({"id_token": raw, "token_type": "Bearer"})).into_response();
    }
    let mut claims = json!({
        "iss": i.url, "aud": CLIENT_ID, "sub": "user-1",
        "email": "ada@example.com", "nonce": code.nonce,
        "iat": i.now, "exp": i.now + b.exp_in, "groups": b.groups,
    });
    if let Value::Object(over) = &b.claims {
        for (k, v) in over {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
    }
    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some(b.kid.unwrap_or_else(|| "k1".into()));
    let der = if b.other_key {
        &i.other_der
    } else {
        &i.key_der
    };
    let id_token = jsonwebtoken::encode(&h, &claims, &EncodingKey::from_ec_der(der)).unwrap();
    Json(json!({"id_token": id_token, "access_token": "at", "token_type": "Bearer"}))
        .into_response()
}

/// A browser, by hand: its cookies for pamd, no redirect followed.
#[derive(Clone, Default, Debug)]
pub struct Browser {
    pub cookies: HashMap<String, String>,
}

/// Where a sign-in ended: pamd's answer to the callback.
pub struct Callback {
    pub status: u16,
    pub body: Value,
    pub browser: Browser,
    /// The callback URL (to replay it).
    pub url: String,
    /// pamd's Set-Cookie headers, as sent.
    pub set_cookies: Vec<String>,
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

impl Browser {
    fn take_cookies(&mut self, r: &reqwest::Response) {
        for v in r.headers().get_all(header::SET_COOKIE) {
            let v = v.to_str().unwrap();
            let (pair, _) = v.split_once(';').unwrap_or((v, ""));
            let (k, val) = pair.split_once('=').unwrap();
            if v.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.into(), val.into());
            }
        }
    }

    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// `/auth/login` → the issuer → pamd's callback (not sent: the
    /// caller may bend it), the issuer's redirect's URL.
    pub async fn start(&mut self, pamd: &str) -> Result<String, (u16, Value)> {
        let c = client();
        let r = c.get(format!("{pamd}/auth/login")).send().await.unwrap();
        if r.status() != StatusCode::SEE_OTHER {
            let s = r.status().as_u16();
            return Err((s, r.json().await.unwrap_or(Value::Null)));
        }
        self.take_cookies(&r);
        let to = r.headers()[header::LOCATION].to_str().unwrap().to_string();
        let r = c.get(&to).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "the issuer's authorize");
        // The configured redirect_url names pamd's host, which the test
        // only learns once pamd listens ([`REDIRECT_URL`]): the browser
        // goes to this pamd.
        let back = reqwest::Url::parse(r.headers()[header::LOCATION].to_str().unwrap()).unwrap();
        assert!(back.as_str().starts_with(REDIRECT_URL), "{back}");
        Ok(format!(
            "{pamd}{}?{}",
            back.path(),
            back.query().unwrap_or("")
        ))
    }

    /// Sends the callback as this browser.
    pub async fn callback(&mut self, url: &str) -> Callback {
        let r = client()
            .get(url)
            .header(header::COOKIE, self.cookie_header())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        self.take_cookies(&r);
        let set_cookies = r
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        let body = r.json().await.unwrap_or(Value::Null);
        Callback {
            status,
            body,
            browser: self.clone(),
            url: url.to_string(),
            set_cookies,
        }
    }

    /// The whole sign-in.
    pub async fn sign_in(pamd: &str) -> Callback {
        let mut b = Browser::default();
        match b.start(pamd).await {
            Ok(url) => b.callback(&url).await,
            Err((status, body)) => Callback {
                status,
                body,
                browser: b,
                url: String::new(),
                set_cookies: Vec::new(),
            },
        }
    }

    /// A request with this browser's cookies (and `csrf` as X-PAM-CSRF).
    pub async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        csrf: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = client()
            .request(method, url)
            .header(header::COOKIE, self.cookie_header());
        if let Some(c) = csrf {
            req = req.header("X-PAM-CSRF", c);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    pub fn csrf(&self) -> String {
        self.cookies.get("pam_csrf").cloned().unwrap_or_default()
    }
}
