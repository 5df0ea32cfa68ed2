//! The streamable HTTP client with W3C trace context in the headers: a `tools/call`
//! whose `_meta` carries a `traceparent` (and `tracestate`) is posted with the same
//! values as HTTP headers, so an HTTP server, proxy or load balancer that reads only
//! headers joins the caller's trace too. Everything else is reqwest's client as is.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, RequestParamsMeta,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

/// reqwest's streamable HTTP client, passing a call's trace context as headers.
#[derive(Debug, Clone, Default)]
pub struct TracedClient(pub reqwest::Client);

/// `headers` with the `traceparent`/`tracestate` of `message`'s `_meta`, when it is a
/// tool call that carries them.
fn with_trace(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return headers;
    };
    // rmcp moves a request's `_meta` into its extensions on the way out; a request built
    // by hand keeps it in its params.
    let outgoing = request.request.get_meta();
    let typed = call.params.meta();
    let field = |get: fn(&rmcp::model::MetaObject) -> Option<&str>| {
        get(outgoing).or_else(|| typed.and_then(|m| get(m)))
    };
    let pairs = [
        (
            "traceparent",
            field(rmcp::model::MetaObject::get_traceparent),
        ),
        ("tracestate", field(rmcp::model::MetaObject::get_tracestate)),
    ];
    for (name, value) in pairs {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

impl StreamableHttpClient for TracedClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let headers = with_trace(&message, custom_headers);
        self.0.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            max_sse_event_size,
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let headers = with_trace(&message, custom_headers);
        self.0.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            limits,
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
    + '_ {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
    + '_ {
        self.0.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, Request, RequestId};

    #[test]
    fn a_call_with_trace_context_carries_it_as_headers() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let mut params = CallToolRequestParams::new("echo");
        params.set_traceparent(parent);
        let message = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(Request::new(params)),
            RequestId::Number(1),
        );
        let headers = with_trace(&message, HashMap::new());
        let header = |name| headers.get(&HeaderName::from_static(name));
        assert_eq!(header("traceparent").unwrap(), parent);
        assert!(header("tracestate").is_none());
    }
}
