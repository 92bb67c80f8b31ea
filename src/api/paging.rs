//! Cloudflare's list paging: the `page` and `per_page` query parameters and the `result_info` of a page.

use actix_web::HttpRequest;
use chrono::{DateTime, Utc};
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

/// A 400 naming the parameters a read allows when the query has another.
pub fn only_known(pairs: &[(String, String)], known: &[&str]) -> Result<(), ApiError> {
    match pairs.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        Some((unknown, _)) => {
            Err(ApiError::invalid(format!("unknown query parameter {unknown:?}: use {}", known.join(", "))))
        }
        None => Ok(()),
    }
}

/// The value of the query parameter `key`, if given.
pub fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The time the query parameter `key` gives, in RFC 3339; a 400 saying so when it is another form.
pub fn time_param(pairs: &[(String, String)], key: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    param(pairs, key)
        .map(|raw| {
            DateTime::parse_from_rfc3339(raw)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ApiError::invalid(format!("{key} must be an RFC 3339 time, such as 2026-11-29T00:00:00Z")))
        })
        .transpose()
}

/// A query string as name-value pairs (a name may repeat).
pub fn query_pairs(req: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(req.query_string()).map_err(|e| ApiError::invalid(format!("invalid query string: {e}")))
}

/// Cloudflare's `page` (from 1) and `per_page` query parameters of a list. Every list answers a page past
/// its last with no items and a `result_info` that echoes the page asked for, so a client that pages
/// until it gets an empty page (the SDKs' auto-pagination) stops there.
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

    /// The paging of a request whose query holds nothing else.
    pub fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        Self::parse(&query_pairs(req)?)
    }

    /// For the lists Cloudflare's schema gives no paging parameters (queues, consumers): the SDKs ask once
    /// and read one page, so a request without `page` and `per_page` gets the whole list (None).
    pub fn parse_optional(pairs: &[(String, String)]) -> Result<Option<Self>, ApiError> {
        if pairs.iter().any(|(k, _)| k == "page" || k == "per_page") {
            Self::parse(pairs).map(Some)
        } else {
            Ok(None)
        }
    }

    /// How many items come before this page.
    pub fn offset(&self) -> i64 {
        (self.page - 1) * self.per_page
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

    /// This page of a list held whole (an account's one account, a queue's consumers), with its
    /// `result_info`.
    pub fn page_of<T>(&self, items: Vec<T>) -> (Vec<T>, ResultInfo) {
        let total = items.len() as i64;
        let skip = usize::try_from(self.offset()).unwrap_or(usize::MAX);
        let page: Vec<T> = items.into_iter().skip(skip).take(self.per_page as usize).collect();
        let info = self.info(page.len(), total);
        (page, info)
    }
}

/// The `result_info` of an answer that holds a whole list of `count` items as its one page.
pub fn whole(count: usize) -> ResultInfo {
    let total = count as i64;
    ResultInfo { page: 1, per_page: total, count, total_count: total, total_pages: i64::from(count > 0) }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn paging(page: i64, per_page: i64) -> Paging {
        Paging { page, per_page }
    }

    #[test]
    fn a_page_past_the_last_is_empty_and_echoes_the_page_asked_for() {
        let (items, info) = paging(3, 2).page_of(vec![1, 2, 3, 4, 5]);
        assert_eq!(
            (items, info.page, info.per_page, info.count, info.total_count, info.total_pages),
            (vec![5], 3, 2, 1, 5, 3)
        );
        let (items, info) = paging(4, 2).page_of(vec![1, 2, 3, 4, 5]);
        assert_eq!((items.len(), info.page, info.count, info.total_count, info.total_pages), (0, 4, 0, 5, 3));
        let (items, info) = paging(i64::from(i32::MAX), MAX_PER_PAGE).page_of(vec![1]);
        assert_eq!((items.len(), info.page), (0, i64::from(i32::MAX)));
    }

    #[test]
    fn paging_parameters_are_optional_only_where_asked() {
        let pairs = |q: &[(&str, &str)]| q.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert!(Paging::parse_optional(&pairs(&[("name", "a")])).unwrap().is_none());
        let only_page = Paging::parse_optional(&pairs(&[("page", "2")])).unwrap().unwrap();
        assert_eq!((only_page.page, only_page.per_page), (2, DEFAULT_PER_PAGE));
        assert!(Paging::parse_optional(&pairs(&[("per_page", "0")])).is_err());
        let info = whole(0);
        assert_eq!((info.page, info.per_page, info.total_pages), (1, 0, 0));
        assert_eq!(whole(45).total_pages, 1);
    }
}
