//! The OIDC issuer as pamd talks to it: discovery, its keys (JWKS) and the
//! ID token's verification.
//!
//! Every fetch follows no redirect (an issuer that answers 3xx is
//! misconfigured, and a redirect must not carry the code or the client
//! secret elsewhere), has a timeout and reads at most [`MAX_BODY`]: a
//! broken or hostile issuer cannot make pamd wait or grow.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;

/// The largest discovery document, JWKS or token answer read.
pub const MAX_BODY: usize = 256 << 10;
/// How far an ID token's `exp` may be behind pamd's clock (clock skew).
pub const LEEWAY_SECONDS: i64 = 60;
/// An unknown `kid` refetches the JWKS at most this often (a flood of
/// tokens with random kids does not become a flood of fetches).
const REFETCH_EVERY: Duration = Duration::from_secs(30);

/// Why a sign-in failed: said to the browser (never a secret) and logged.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

fn refused(msg: impl Into<String>) -> Refused {
    Refused(msg.into())
}

/// The parts of the discovery document pamd uses.
#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// The discovery document, its endpoints parsed.
#[derive(Debug, Clone)]
pub struct Provider {
    pub issuer: String,
    pub authorization_endpoint: reqwest::Url,
    pub token_endpoint: reqwest::Url,
    pub jwks_uri: reqwest::Url,
}

/// The issuer's endpoints and keys, fetched when first needed (pamd starts
/// while the issuer is down) and kept.
pub struct Issuer {
    pub issuer: String,
    pub client_id: String,
    http: reqwest::Client,
    provider: Mutex<Option<Provider>>,
    keys: Mutex<Keys>,
}

#[derive(Default)]
struct Keys {
    set: Vec<Jwk>,
    fetched: Option<Instant>,
}

/// What a verified ID token says.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: String,
    pub name: String,
    pub groups: Vec<String>,
    pub expires_at: DateTime<Utc>,
}

impl Issuer {
    pub fn new(issuer: String, client_id: String) -> anyhow::Result<Issuer> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("pamd/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Issuer {
            issuer,
            client_id,
            http,
            provider: Mutex::new(None),
            keys: Mutex::new(Keys::default()),
        })
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The discovery document (`<issuer>/.well-known/openid-configuration`).
    pub async fn provider(&self) -> Result<Provider, Refused> {
        let mut cached = self.provider.lock().await;
        if let Some(p) = cached.as_ref() {
            return Ok(p.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let body = self.fetch(self.http.get(&url), "discovery").await?;
        let d: Discovery = serde_json::from_slice(&body).map_err(|e| {
            refused(format!(
                "the issuer's discovery document is not OpenID configuration: {e}"
            ))
        })?;
        let url = |u: &str| {
            reqwest::Url::parse(u).map_err(|e| {
                refused(format!(
                    "the discovery document's endpoint {u:?} is not a URL: {e}"
                ))
            })
        };
        let p = Provider {
            authorization_endpoint: url(&d.authorization_endpoint)?,
            token_endpoint: url(&d.token_endpoint)?,
            jwks_uri: url(&d.jwks_uri)?,
            issuer: d.issuer,
        };
        // OpenID Connect Discovery §4.3: the document names the very
        // issuer it was fetched from.
        if p.issuer != self.issuer {
            return Err(refused(format!(
                "the discovery document names issuer {:?}, not the configured {:?}",
                p.issuer, self.issuer
            )));
        }
        for u in [&p.authorization_endpoint, &p.token_endpoint, &p.jwks_uri] {
            if !matches!(u.scheme(), "https" | "http") {
                return Err(refused(format!(
                    "the discovery document's endpoint {u} is not http(s)"
                )));
            }
        }
        *cached = Some(p.clone());
        Ok(p)
    }

    /// Sends `req` and reads its body, at most [`MAX_BODY`]; a non-2xx is
    /// refused with its status only (an error page may echo what was sent).
    pub async fn fetch(
        &self,
        req: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<Vec<u8>, Refused> {
        let mut resp = req
            .send()
            .await
            .map_err(|e| refused(format!("cannot reach the issuer ({what}): {e}")))?;
        if !resp.status().is_success() {
            return Err(refused(format!(
                "the issuer answered {what} with {}",
                resp.status()
            )));
        }
        if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
            return Err(too_big(what));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| refused(format!("cannot read the issuer's {what}: {e}")))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(too_big(what));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The key `kid` names (or the only key, when the token names none),
    /// refetching the JWKS once for a kid it does not know.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, Refused> {
        let mut keys = self.keys.lock().await;
        let pick = |set: &[Jwk]| -> Option<Jwk> {
            match kid {
                Some(k) => set.iter().find(|j| j.common.key_id.as_deref() == Some(k)),
                None if set.len() == 1 => set.first(),
                None => None,
            }
            .cloned()
        };
        if let Some(j) = pick(&keys.set) {
            return Ok(j);
        }
        if keys.fetched.is_none_or(|t| t.elapsed() >= REFETCH_EVERY) {
            let p = self.provider().await?;
            let body = self.fetch(self.http.get(p.jwks_uri), "JWKS").await?;
            let set: JwkSet = serde_json::from_slice(&body)
                .map_err(|e| refused(format!("the issuer's JWKS is not a key set: {e}")))?;
            keys.set = set.keys;
            keys.fetched = Some(Instant::now());
        }
        pick(&keys.set).ok_or_else(|| {
            refused(format!(
                "the ID token ({alg:?}) is signed with a key the issuer does not publish (kid {kid:?})"
            ))
        })
    }

    /// Verifies an ID token: signature (RS256 or ES256 with the issuer's
    /// key), `iss`, `aud`, `exp` (against `now`, pamd's clock, with
    /// [`LEEWAY_SECONDS`]) and `nonce`.
    pub async fn verify(
        &self,
        token: &str,
        nonce: &str,
        groups_claim: &str,
        now: DateTime<Utc>,
    ) -> Result<Identity, Refused> {
        // `alg: none` (and every other algorithm jsonwebtoken does not
        // know) fails here.
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| refused(format!("the ID token is malformed: {e}")))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(refused(format!(
                "the ID token is signed with {:?}; pamd accepts RS256 and ES256",
                header.alg
            )));
        }
        let jwk = self.key(header.kid.as_deref(), header.alg).await?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| refused(format!("the issuer's key cannot be used: {e}")))?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.client_id]);
        // exp is checked below against pamd's (injected) clock.
        v.validate_exp = false;
        v.required_spec_claims = ["exp", "iss", "aud", "sub"]
            .into_iter()
            .map(String::from)
            .collect();
        let data = jsonwebtoken::decode::<Value>(token, &key, &v)
            .map_err(|e| refused(format!("the ID token is not valid: {e}")))?;
        let c = data.claims;
        let exp = c["exp"]
            .as_i64()
            .ok_or_else(|| refused("the ID token's exp is not a number"))?;
        if exp + LEEWAY_SECONDS < now.timestamp() {
            return Err(refused("the ID token has expired"));
        }
        let sent = c["nonce"].as_str().unwrap_or_default();
        if !super::session::same(sent, nonce) {
            return Err(refused(
                "the ID token's nonce is not this sign-in's (a replayed token?)",
            ));
        }
        let subject = c["sub"].as_str().unwrap_or_default().to_string();
        if subject.is_empty() {
            return Err(refused("the ID token has no subject"));
        }
        let name = ["email", "preferred_username"]
            .iter()
            .find_map(|k| c[*k].as_str().filter(|s| !s.is_empty()))
            .unwrap_or(&subject)
            .to_string();
        let groups = match &c[groups_claim] {
            Value::Array(a) => a
                .iter()
                .filter_map(|g| g.as_str().map(String::from))
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        let expires_at = DateTime::from_timestamp(exp, 0)
            .ok_or_else(|| refused("the ID token's exp is out of range"))?;
        Ok(Identity {
            subject,
            name,
            groups,
            expires_at,
        })
    }
}

fn too_big(what: &str) -> Refused {
    refused(format!(
        "the issuer's {what} is larger than {MAX_BODY} bytes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    /// An RSA key made once with openssl for this test only (PKCS#1 DER)
    /// and its public modulus: the tests' issuer (pam-tests) signs ES256,
    /// so RS256 is checked here.
    const RSA_DER: &[u8] = include_bytes!("../../../../tests/fixtures/oidc-rs256-test-key.der");
    const RSA_N: &str = "n13tN0thJsYbxV_mHsPGE3XzJmMyMM-eAJQmA1_RY_NO93xspn-miPIJPi3AlEMHBtBaapx_l5hCC_h6fjtzHaIwYfPy7SgSMHGZWUxQ68zeUaLbEKTkebb2lgv_3Il_mBTRpBgUBQVUvw5fYSTXGAE9e8X1O5LB8hCY6OL2nb4n6D_9E8ay-cEgr86xuIVdPucNxhnKYeSYfNFGZba9d5KrJ7WEQ2bfMYby1wPCDZbvf7JB2B4PPKqdYkk1zH3T635f6WKjJkrF97pADjvaSw_MKyVBHQI8kd-KjIJRNE9Shrcrc4TKfWVUGJmqNvL499RNHISidFjJNef8MeFI4w";

    fn issuer() -> Issuer {
        let i = Issuer::new("https://id.example".into(), "pam".into()).unwrap();
        let jwk: Jwk = serde_json::from_value(
            json!({"kty": "RSA", "kid": "r1", "alg": "RS256", "use": "sig", "n": RSA_N, "e": "AQAB"}),
        )
        .unwrap();
        // Known keys, fetched just now: verify asks nothing of the network.
        *i.keys.try_lock().unwrap() = Keys {
            set: vec![jwk],
            fetched: Some(Instant::now()),
        };
        i
    }

    fn token(alg: Algorithm, claims: Value) -> String {
        let mut h = Header::new(alg);
        h.kid = Some("r1".into());
        jsonwebtoken::encode(&h, &claims, &EncodingKey::from_rsa_der(RSA_DER)).unwrap()
    }

    fn claims(exp: i64) -> Value {
        json!({"iss": "https://id.example", "aud": "pam", "sub": "s1", "nonce": "n1",
               "exp": exp, "preferred_username": "ada", "groups": "team-web"})
    }

    #[tokio::test]
    async fn rs256_tokens_verify_on_pamds_clock_with_leeway() {
        let i = issuer();
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let t = now.timestamp();
        let id = i
            .verify(
                &token(Algorithm::RS256, claims(t + 60)),
                "n1",
                "groups",
                now,
            )
            .await
            .unwrap();
        assert_eq!((id.subject.as_str(), id.name.as_str()), ("s1", "ada"));
        assert_eq!(id.groups, ["team-web"]);
        // Within the leeway, then past it; another nonce; the same key
        // under another RSA algorithm (refused by name). `None`: accepted.
        for (alg, exp, nonce, refused) in [
            (Algorithm::RS256, t - 30, "n1", None),
            (Algorithm::RS256, t - 61, "n1", Some("expired")),
            (Algorithm::RS256, t + 60, "n2", Some("nonce")),
            (Algorithm::RS384, t + 60, "n1", Some("RS384")),
        ] {
            let got = i
                .verify(&token(alg, claims(exp)), nonce, "groups", now)
                .await;
            match (got, refused) {
                (Ok(_), None) => {}
                (Err(e), Some(why)) => assert!(e.0.contains(why), "{alg:?} {exp}: {e}"),
                (got, _) => panic!("{alg:?} exp {exp} nonce {nonce}: {:?}", got.map(|_| ())),
            }
        }
        // A flipped signature byte.
        let good = token(Algorithm::RS256, claims(t + 60));
        let (head, sig) = good.rsplit_once('.').unwrap();
        let bad = format!(
            "{head}.{}{}",
            if sig.starts_with('A') { "B" } else { "A" },
            &sig[1..]
        );
        let e = i.verify(&bad, "n1", "groups", now).await.unwrap_err();
        assert!(e.0.contains("not valid"), "{e}");
    }
}
