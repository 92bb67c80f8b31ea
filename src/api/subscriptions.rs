//! Event subscriptions (Cloudflare's `event_subscriptions/subscriptions`): skiplock has no event
//! sources yet, so the list is empty and a create names the sources it supports (none).

use actix_web::{HttpRequest, HttpResponse};

use super::envelope::ok_list;
use super::paging::Paging;
use crate::api::extract::{Authed, QueuesRead, QueuesWrite};
use crate::error::{ApiError, ApiResult};

/// The empty list, paged as any other: a page past its last echoes the page asked for.
pub async fn list(_auth: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let (page, info) = Paging::of(&req)?.page_of(Vec::<()>::new());
    Ok(ok_list(page, info))
}

pub async fn create(_auth: Authed<QueuesWrite>) -> ApiResult<HttpResponse> {
    Err(ApiError::invalid(
        "event subscriptions are not supported: this server has no event sources (supported sources: none)",
    ))
}

/// Get, update and delete of a subscription: none exists, so every id is unknown.
pub async fn unknown(_auth: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    Err(ApiError::no_route_to(req.path()))
}
