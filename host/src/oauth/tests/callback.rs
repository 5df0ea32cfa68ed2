//! Tests of the loopback listener: parsing the callback and the state, taking the
//! callback, refusing a foreign state.

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::oauth::callback::{
    Callback, SUCCESS_PAGE, parse_callback, respond, state_of, wait_for_callback,
};

#[test]
fn callback_parsing() {
    let ok = parse_callback("/callback?code=abc&state=s1&iss=https%3A%2F%2Fas", "s1");
    assert_eq!(
        ok,
        Ok(Callback::Code {
            code: "abc".into(),
            issuer: Some("https://as".into())
        })
    );
    assert_eq!(parse_callback("/favicon.ico", "s1"), Ok(Callback::Other));
    assert_eq!(parse_callback("*", "s1"), Ok(Callback::Other));

    let wrong = parse_callback("/callback?code=abc&state=other", "s1")
        .unwrap_err()
        .0;
    assert!(wrong.contains("state"), "{wrong}");
    assert!(!wrong.contains("abc"), "never the code: {wrong}");
    assert!(
        parse_callback("/callback?code=abc", "s1").is_err(),
        "no state"
    );
    assert!(
        parse_callback("/callback?state=s1", "s1").is_err(),
        "no code"
    );

    let denied = parse_callback(
        "/callback?error=access_denied&error_description=no+thanks&state=s1",
        "s1",
    )
    .unwrap_err()
    .0;
    assert!(
        denied.contains("access_denied") && denied.contains("no thanks"),
        "{denied}"
    );
}

#[test]
fn state_comes_from_the_authorization_url() {
    assert_eq!(
        state_of("https://as.example/authorize?response_type=code&state=xyz%3D&client_id=c")
            .as_deref(),
        Some("xyz=")
    );
    assert_eq!(state_of("https://as.example/authorize?client_id=c"), None);
}

#[tokio::test]
async fn loopback_listener_takes_the_callback() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = tokio::spawn(async move {
        // An idle preconnect must not hold the real request up.
        let _idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut other = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        other
            .write_all(b"GET /favicon.ico HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let mut hit = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        hit.write_all(b"GET /callback?code=c1&state=s1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        hit.read_to_string(&mut answer).await.unwrap();
        answer
    });
    let hit = tokio::time::timeout(Duration::from_secs(5), wait_for_callback(&listener, "s1"))
        .await
        .expect("in time")
        .expect("a callback");
    assert_eq!(hit.code, "c1");
    assert_eq!(hit.issuer, None);
    respond(hit.stream, "200 OK", SUCCESS_PAGE).await;
    let answer = client.await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("authorized"),
        "{answer}"
    );
}

#[tokio::test]
async fn loopback_listener_refuses_a_foreign_state() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /callback?code=c1&state=evil HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer).await;
    });
    let e = tokio::time::timeout(Duration::from_secs(5), wait_for_callback(&listener, "s1"))
        .await
        .expect("in time")
        .err()
        .expect("refused")
        .0;
    assert!(e.contains("state"), "{e}");
}
