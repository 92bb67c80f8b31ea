//! `Operated<R>`: the operator API's handler-signature guard. It verifies the bearer token as an
//! operator token (an account's token is refused here, as an operator token is on the tenant API) and
//! checks that it carries the scope `R` requires: `read` for reads, `write` for changes.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use actix_web::{web, FromRequest, HttpRequest};

use crate::api::extract::{bearer, client_address, cooling_address, failed_from, missing_bearer, request_id, slowly};
use crate::auth::{Operator, OperatorScope, Token, TokenKind};
use crate::engine::audit::Actor;
use crate::engine::Engine;
use crate::error::{ApiError, Kind};

pub trait OperatorRequirement {
    const SCOPE: OperatorScope;
}

pub struct Read;
impl OperatorRequirement for Read {
    const SCOPE: OperatorScope = OperatorScope::Read;
}

pub struct Write;
impl OperatorRequirement for Write {
    const SCOPE: OperatorScope = OperatorScope::Write;
}

pub struct Operated<R> {
    pub operator: Operator,
    /// Who asks, as the audit log records it.
    pub actor: Actor,
    _requirement: PhantomData<R>,
}

impl<R: OperatorRequirement + 'static> FromRequest for Operated<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let state = req.app_data::<web::Data<Engine>>().expect("the engine is registered").clone();
        let bearer = bearer(req);
        let (ip, request_id) = (client_address(req), request_id(req));
        Box::pin(async move {
            let text = bearer.ok_or_else(missing_bearer)?;
            if let Err(refusal) = cooling_address(&state, ip, &text) {
                return Err(slowly(&state, ip, refusal).await);
            }
            let Some(operator) = state.operators.verify(&text).await? else {
                failed_from(&state, ip);
                let account = Token::parse(&text).is_some_and(|t| t.kind == TokenKind::Account);
                let message = if account {
                    "an account's token cannot use the operator API; use an operator token (sko_...)"
                } else {
                    "invalid or revoked operator token"
                };
                return Err(slowly(&state, ip, ApiError::new(Kind::Unauthorized, message)).await);
            };
            if !operator.has(R::SCOPE) {
                state.metrics.auth_refusals.with_label_values(&["missing_scope"]).inc();
                return Err(ApiError::new(
                    Kind::MissingScope,
                    format!("this operator token lacks the {} scope this endpoint needs", R::SCOPE.as_str()),
                ));
            }
            let actor = Actor { operator: true, token_id: operator.token_id.0, ip, request_id };
            Ok(Self { operator, actor, _requirement: PhantomData })
        })
    }
}
