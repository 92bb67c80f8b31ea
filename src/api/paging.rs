//! Cloudflare's list paging: the `page` and `per_page` query parameters and the `result_info` of a page.

use actix_web::HttpRequest;
use serde::Serialize;

use crate::error::ApiError;

#[derive(Serialize)]
pub struct ResultInfo {
    pub page: i64,
    pub per_page: i64,
    pub count: usize,
    pub total_count: i64,
    pub total_pages: i64,
}

/// A query string as name-value pairs (a name may repeat).
pub fn query_pairs(req: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(req.query_string()).map_err(|e| ApiError::invalid(format!("invalid query string: {e}")))
}

/// Cloudflare's `page` (from 1) and `per_page` query parameters of a list.
pub struct Paging {
    pub page: i64,
    pub per_page: i64,
}

/// The page size of a list when the request gives none, and the largest it may ask for.
pub const DEFAULT_PER_PAGE: i64 = 20;
pub const MAX_PER_PAGE: i64 = 1000;

impl Paging {
    /// Reads `page` and `per_page` from the query, answering 400 naming the one that is out of range.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let param = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        Ok(Self {
            page: positive("page", param("page"), 1, i64::from(i32::MAX))?,
            per_page: positive("per_page", param("per_page"), DEFAULT_PER_PAGE, MAX_PER_PAGE)?,
        })
    }

    /// The `result_info` of a page holding `count` items out of `total`.
    pub fn info(&self, count: usize, total: i64) -> ResultInfo {
        ResultInfo {
            page: self.page,
            per_page: self.per_page,
            count,
            total_count: total,
            total_pages: (total + self.per_page - 1) / self.per_page,
        }
    }
}

fn positive(field: &str, raw: Option<&str>, default: i64, max: i64) -> Result<i64, ApiError> {
    match raw {
        None => Ok(default),
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|v| (1..=max).contains(v))
            .ok_or_else(|| ApiError::invalid(format!("{field} must be an integer from 1 to {max}, got {text:?}"))),
    }
}
