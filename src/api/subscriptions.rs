//! Event subscriptions (Cloudflare's `event_subscriptions/subscriptions`): skiplock has no event
//! sources yet, so the list is empty and a create names the sources it supports (none).

use actix_web::HttpResponse;

use super::envelope::{ok_list, ResultInfo};
use crate::api::extract::{Authed, QueuesRead, QueuesWrite};
use crate::error::{ApiError, ApiResult};

pub async fn list(_auth: Authed<QueuesRead>) -> ApiResult<HttpResponse> {
    let info = ResultInfo { page: 1, per_page: 20, count: 0, total_count: 0, total_pages: 0 };
    Ok(ok_list(Vec::<()>::new(), info))
}

pub async fn create(_auth: Authed<QueuesWrite>) -> ApiResult<HttpResponse> {
    Err(ApiError::invalid(
        "event subscriptions are not supported: this server has no event sources (supported sources: none)",
    ))
}

/// Get, update and delete of a subscription: none exists, so every id is unknown.
pub async fn unknown(_auth: Authed<QueuesRead>, req: actix_web::HttpRequest) -> ApiResult<HttpResponse> {
    Err(ApiError::no_route_to(req.path()))
}
