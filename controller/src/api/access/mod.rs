//! Who is calling and what they may do: bearer tokens and dashboard
//! sessions ([`auth`]), the permission every route declares ([`authz`]),
//! OIDC sign-in ([`oidc`]), the tokens streams and leases hold
//! ([`revocation`]), tokens' last uses ([`token_uses`]) and the per-token
//! rate limits ([`rate_limit`]).

pub mod auth;
pub mod authz;
pub mod oidc;
pub mod rate_limit;
pub mod revocation;
pub mod token_uses;
