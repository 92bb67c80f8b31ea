//! `Authed<R>`: the handler-signature guard. It verifies the bearer token, checks that the path's
//! account is the token's own (another account's is a 404, as for any object it cannot see), that the
//! token is within its validity window, used from an address it admits and carries the scopes `R`
//! requires, and that the account is served (not suspended) and within its request rate.

use std::future::Future;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::pin::Pin;
use std::str::FromStr;

use actix_web::{http::header, web, FromRequest, HttpMessage, HttpRequest};

use crate::api::client::TrustedProxies;
use crate::auth::{failures, Principal, Scope, Token, TokenKind};
use crate::engine::audit::Actor;
use crate::engine::limits::Rate;
use crate::engine::Engine;
use crate::error::{ApiError, Kind};
use crate::ids::{
    AccountId, BindingId, ConsumerId, MalformedId, MessageId, QueueId, RedriveId, ScheduleId, SubscriptionId, TokenId,
    TopicId,
};
use crate::store::owned::OwnedQueue;
use crate::telemetry::RequestId;

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
    /// Who asks, as the audit log records it.
    pub actor: Actor,
    _requirement: PhantomData<R>,
}

impl<R> Authed<R> {
    pub fn account_id(&self) -> AccountId {
        self.principal.account_id
    }
}

/// The request's id, as the request span set it.
pub fn request_id(req: &HttpRequest) -> Option<String> {
    req.extensions().get::<RequestId>().map(|id| id.0.clone())
}

impl<R: Requirement + 'static> FromRequest for Authed<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let state = req.app_data::<web::Data<Engine>>().expect("the engine is registered").clone();
        let bearer = bearer(req);
        let path_account = req.match_info().get("account_id").map(str::to_owned);
        let client = client_address(req);
        let path = req.path().to_owned();
        let request_id = request_id(req);
        Box::pin(async move {
            let text = bearer.ok_or_else(missing_bearer)?;
            let counted = |reason| state.metrics.auth_refusals.with_label_values(&[reason]).inc();
            if let Err(refusal) = cooling_address(&state, client, &text) {
                return Err(slowly(&state, client, refusal).await);
            }
            let Some(principal) = state.verifier.verify(&text).await? else {
                failed_from(&state, client);
                return Err(slowly(&state, client, refused(&text)).await);
            };
            if let Some(why) = principal.refused_at(chrono::Utc::now()) {
                counted("outside_window");
                return Err(ApiError::new(Kind::TokenOutsideWindow, why));
            }
            if !principal.request_ip.admits(client) {
                counted("address_refused");
                // Cloudflare's words for a token used from an address its condition refuses.
                let from = client.map_or_else(|| "an unknown address".to_owned(), |ip| ip.to_string());
                return Err(ApiError::new(
                    Kind::AddressRefused,
                    format!("Cannot use the access token from location: {from}"),
                ));
            }
            if let Some(raw) = path_account {
                // A malformed id and another account's id get the same answer, as for any object it cannot see.
                if raw.parse::<AccountId>().ok() != Some(principal.account_id) {
                    return Err(ApiError::no_route_to(&path));
                }
            }
            if let Some(missing) = R::SCOPES.iter().find(|s| !principal.has(**s)) {
                counted("missing_scope");
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
            if let Some(status) = state.standing.refusal(principal.account_id) {
                counted("account_refused");
                return Err(ApiError::account_refused(status));
            }
            let limits = state.limits_of(principal.account_id);
            if let Err(wait) = state.request_rate.take(principal.account_id, Rate::requests(&limits)) {
                let message = format!(
                    "this account is over its rate of {} requests per second; retry after the Retry-After seconds",
                    limits.rate_per_second
                );
                return Err(ApiError::new(Kind::RateLimited, message).after(wait.as_secs_f64().ceil() as u64));
            }
            let actor = Actor { operator: false, token_id: principal.token_id.0, ip: client, request_id };
            Ok(Self { principal, actor, _requirement: PhantomData })
        })
    }
}

/// Refuses, unheard, a token this node has not verified when it comes from an address cooling down after
/// too many failed authentications (`auth::failures::PER_ADDRESS`; one try a second is still heard), so
/// that a flood from one address costs neither argon2 nor a row read; a token verified here passes.
pub fn cooling_address(state: &Engine, client: Option<IpAddr>, text: &str) -> Result<(), ApiError> {
    let Some(ip) = client else { return Ok(()) };
    if !state.addresses.cooling(ip)
        || state.verifier.known_good(text)
        || state.operators.known_good(text)
        || state.addresses.may_try(ip)
    {
        return Ok(());
    }
    state.metrics.auth_refusals.with_label_values(&["address_cooling"]).inc();
    let message = "too many failed authentications from this address; retry after the Retry-After seconds";
    Err(ApiError::new(Kind::RateLimited, message).after(failures::PER_ADDRESS.cool_down.as_secs()))
}

/// Answers `refusal` to a client whose address cools down only after `failures::HOLD`, so that a flood
/// waiting on its answers slows to a request a second per connection.
pub async fn slowly(state: &Engine, client: Option<IpAddr>, refusal: ApiError) -> ApiError {
    if client.is_some_and(|ip| state.addresses.cooling(ip)) {
        state.refusal_holds.hold().await;
    }
    refusal
}

/// Counts a token that did not verify against the address it came from.
pub fn failed_from(state: &Engine, client: Option<IpAddr>) {
    state.metrics.auth_refusals.with_label_values(&["invalid_token"]).inc();
    if let Some(ip) = client {
        state.addresses.failed(ip);
    }
}

/// The client's address: the peer, or behind trusted proxies the address they forward.
pub fn client_address(req: &HttpRequest) -> Option<IpAddr> {
    req.app_data::<web::Data<TrustedProxies>>().and_then(|proxies| proxies.client_of(req))
}

pub fn missing_bearer() -> ApiError {
    ApiError::new(Kind::Unauthorized, "missing bearer token: send 'Authorization: Bearer <token>'")
}

/// The request's bearer token, if it sends one.
pub fn bearer(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|v| v.trim().to_owned())
}

/// The answer to a token that did not verify: an operator token gets told where it belongs.
fn refused(text: &str) -> ApiError {
    let operator = Token::parse(text).is_some_and(|t| t.kind == TokenKind::Operator);
    let message = if operator {
        "an operator token cannot use the tenant API; use an account's token (skl_...), or the operator API"
    } else {
        "invalid or revoked API token"
    };
    ApiError::new(Kind::Unauthorized, message)
}

/// A queue of the token's account, named by the path's `{queue_id}`: `Authed<R>` first, then the id is
/// parsed (a 400 when malformed) and checked to be the account's (a 404 otherwise, as for any queue it
/// cannot see). Handlers get an `OwnedQueue`, which is what the store's queue functions take.
pub struct AuthedQueue<R> {
    pub auth: Authed<R>,
    pub queue: OwnedQueue,
}

impl<R: Requirement + 'static> FromRequest for AuthedQueue<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let engine = req.app_data::<web::Data<Engine>>().expect("the engine is registered").clone();
        let authed = Authed::<R>::from_request(req, payload);
        let raw = req.match_info().get("queue_id").unwrap_or_default().to_owned();
        Box::pin(async move {
            let auth = authed.await?;
            let id: QueueId = path_id(&raw, Kind::MalformedQueueId)?;
            tracing::Span::current().record("queue_id", tracing::field::display(id));
            let queue = engine.owned_queue(auth.account_id(), id).await?.ok_or_else(ApiError::queue_not_found)?;
            Ok(AuthedQueue { auth, queue })
        })
    }
}

/// An id in the path other than the account's and the queue's, by the segment that names it.
pub trait PathSegment: FromStr<Err = MalformedId> {
    const SEGMENT: &'static str;
}

impl PathSegment for ConsumerId {
    const SEGMENT: &'static str = "consumer_id";
}

impl PathSegment for MessageId {
    const SEGMENT: &'static str = "message_id";
}

impl PathSegment for RedriveId {
    const SEGMENT: &'static str = "redrive_id";
}

impl PathSegment for ScheduleId {
    const SEGMENT: &'static str = "schedule_id";
}

impl PathSegment for SubscriptionId {
    const SEGMENT: &'static str = "subscription_id";
}

impl PathSegment for TopicId {
    const SEGMENT: &'static str = "topic_id";
}

impl PathSegment for BindingId {
    const SEGMENT: &'static str = "binding_id";
}

impl PathSegment for AccountId {
    const SEGMENT: &'static str = "account_id";
}

impl PathSegment for TokenId {
    const SEGMENT: &'static str = "token_id";
}

/// A typed id from the path (`ConsumerId`, `RedriveId`, `TokenId`); a 400 that says so when malformed.
pub struct PathId<T>(pub T);

impl<T: PathSegment> FromRequest for PathId<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let raw = req.match_info().get(T::SEGMENT).unwrap_or_default();
        std::future::ready(path_id(raw, Kind::MalformedObjectId).map(PathId))
    }
}

/// Parses an id from the path, answering 400 with the given code when it is malformed.
pub fn path_id<T: FromStr<Err = MalformedId>>(raw: &str, kind: Kind) -> Result<T, ApiError> {
    raw.parse().map_err(|e: MalformedId| ApiError::new(kind, e.to_string()))
}
