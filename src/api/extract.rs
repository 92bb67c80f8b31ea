//! `Authed<R>`: the handler-signature guard. It verifies the bearer token, checks that the path's
//! account is the token's own (another account's is a 404, as for any object it cannot see), that the
//! token carries the scopes `R` requires, and that the account is within its request rate.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use actix_web::{http::header, web, FromRequest, HttpRequest};

use crate::auth::{Principal, Scope};
use crate::engine::Engine;
use crate::error::{ApiError, Kind};
use crate::ids::AccountId;

pub trait Requirement {
    const SCOPES: &'static [Scope];
}

macro_rules! requirement {
    ($name:ident, [$($scope:ident),*]) => {
        pub struct $name;
        impl Requirement for $name {
            const SCOPES: &'static [Scope] = &[$(Scope::$scope),*];
        }
    };
}

requirement!(TokenOnly, []);
requirement!(QueuesRead, [QueuesRead]);
requirement!(QueuesWrite, [QueuesWrite]);
requirement!(QueuesReadWrite, [QueuesRead, QueuesWrite]);
requirement!(TokensWrite, [TokensWrite]);

pub struct Authed<R> {
    pub principal: Principal,
    _requirement: PhantomData<R>,
}

impl<R> Authed<R> {
    pub fn account_id(&self) -> AccountId {
        self.principal.account_id
    }
}

impl<R: Requirement + 'static> FromRequest for Authed<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let state = req.app_data::<web::Data<Engine>>().expect("the engine is registered").clone();
        let bearer = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(|v| v.trim().to_owned());
        let path_account = req.match_info().get("account_id").map(str::to_owned);
        let path = req.path().to_owned();
        Box::pin(async move {
            let text = bearer.ok_or_else(|| {
                ApiError::new(Kind::Unauthorized, "missing bearer token: send 'Authorization: Bearer <token>'")
            })?;
            let principal = state
                .verifier
                .verify(&text)
                .await?
                .ok_or_else(|| ApiError::new(Kind::Unauthorized, "invalid or revoked API token"))?;
            if let Some(raw) = path_account {
                // A malformed id and another account's id get the same answer, as for any object it cannot see.
                if raw.parse::<AccountId>().ok() != Some(principal.account_id) {
                    return Err(ApiError::no_route_to(&path));
                }
            }
            if let Some(missing) = R::SCOPES.iter().find(|s| !principal.has(**s)) {
                let needed: Vec<_> = R::SCOPES.iter().map(|s| s.as_str()).collect();
                return Err(ApiError::new(
                    Kind::MissingScope,
                    format!(
                        "this token lacks the {} scope; this endpoint needs {}",
                        missing.as_str(),
                        needed.join(" and ")
                    ),
                ));
            }
            tracing::Span::current().record("account_id", tracing::field::display(principal.account_id));
            if let Err(wait) = state.request_rate.take(principal.account_id) {
                let message = format!(
                    "this account is over its rate of {} requests per second; retry after the Retry-After seconds",
                    state.limits.rate_per_second
                );
                return Err(ApiError::new(Kind::RateLimited, message).after(wait.as_secs_f64().ceil() as u64));
            }
            Ok(Self { principal, _requirement: PhantomData })
        })
    }
}
