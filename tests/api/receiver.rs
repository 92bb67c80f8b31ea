//! A real local HTTP server that receives webhook deliveries, records them and answers as told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub raw: String,
    pub body: Value,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
    }

    pub fn ids(&self) -> Vec<String> {
        self.body["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
    }
}

/// How the receiver answers a delivery.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
    pub delay: Duration,
}

impl Answer {
    pub fn status(status: u16) -> Self {
        Self { status, body: String::new(), headers: vec![], delay: Duration::ZERO }
    }
    pub fn json(body: Value) -> Self {
        Self { body: body.to_string(), ..Self::status(200) }
    }
}

/// Deliveries of the largest messages a plan allows (1 MiB, base64 in a batch) fit.
const MAX_BODY: usize = 16 * 1024 * 1024;

type Handler = Arc<dyn Fn(&Received) -> Answer + Send + Sync>;

#[derive(Clone)]
struct State {
    received: Arc<Mutex<Vec<Received>>>,
    handler: Arc<Mutex<Handler>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

pub struct Receiver {
    pub url: String,
    pub port: u16,
    state: State,
    handle: actix_web::dev::ServerHandle,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        tokio::spawn(async move { handle.stop(false).await });
    }
}

async fn receive(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    let raw = String::from_utf8_lossy(&body).into_owned();
    let received = Received {
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: serde_json::from_str(&raw).unwrap_or(Value::Null),
        raw,
        at: Instant::now(),
    };
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    state.received.lock().unwrap().push(received.clone());
    let handler = state.handler.lock().unwrap().clone();
    let answer = handler(&received);
    tokio::time::sleep(answer.delay).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut response = HttpResponse::build(actix_web::http::StatusCode::from_u16(answer.status).unwrap());
    for (name, value) in &answer.headers {
        response.insert_header((*name, value.as_str()));
    }
    response.body(answer.body)
}

impl Receiver {
    pub async fn start(handler: impl Fn(&Received) -> Answer + Send + Sync + 'static) -> Receiver {
        let state = State {
            received: Arc::default(),
            handler: Arc::new(Mutex::new(Arc::new(handler))),
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
        };
        let data = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(MAX_BODY))
                .default_service(web::to(receive))
        })
        .workers(2)
        .disable_signals()
        .bind("127.0.0.1:0")
        .unwrap();
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver { url: format!("http://127.0.0.1:{port}/hook"), port, state, handle }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Waits until `count` deliveries arrived, or panics at the deadline.
    pub async fn wait_for(&self, count: usize, deadline: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= count {
                return got;
            }
            assert!(start.elapsed() < deadline, "expected {count} deliveries, got {}", got.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
