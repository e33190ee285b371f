package io.kvrouter.gateway;

import io.helidon.http.ClientResponseHeaders;
import io.helidon.http.HeaderNames;
import io.helidon.http.HeaderValues;
import io.helidon.http.WritableHeaders;
import io.helidon.webclient.api.WebClientServiceRequest;
import io.helidon.webclient.api.WebClientServiceResponse;
import io.helidon.webclient.spi.WebClientService;

/**
 * Keeps the connection of an engine answer that HTTP/1 does not frame out of the client's pool.
 * Helidon's client (4.3) returns a connection to its pool when the head it parsed has neither
 * Content-Length nor Transfer-Encoding (it counts such a body as empty), unless that head says
 * {@code Connection: close}. Two kinds of answer reach it so: one framed by the close of the
 * connection (HTTP/1.0, or HTTP/1.1 without either field: the engine closes after it), and an
 * interim {@code 1xx} (103 Early Hints), whose real answer {@link EngineAnswer} reads past it and
 * whose own {@code Connection} field Helidon never sees. Pooled, such a connection is one the
 * engine closed or whose framing the client lost, and the next request on it fails (a 502 {@code
 * connect} before this service). This service adds {@code Connection: close} to those heads, so
 * closing the response closes the connection.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless; Helidon calls handle() on the requesting thread once per request, after its HTTP/1
 * call chain has parsed the head. An answer with a framed body, 204 or 304 (no body), or a
 * Connection: close already, passes unchanged (two header look-ups, no allocation); only an
 * unframed head is copied.
 * </pre>
 */
final class CloseUnframedAnswers implements WebClientService {
  @Override
  public WebClientServiceResponse handle(Chain chain, WebClientServiceRequest request) {
    WebClientServiceResponse res = chain.proceed(request);
    ClientResponseHeaders h = res.headers();
    int code = res.status().code();
    if (h.contains(HeaderNames.CONTENT_LENGTH)
        || h.contains(HeaderNames.TRANSFER_ENCODING)
        || code == 204
        || code == 304
        || h.contains(HeaderValues.CONNECTION_CLOSE)) {
      return res;
    }
    WritableHeaders<?> closing = WritableHeaders.create(h);
    closing.set(HeaderValues.CONNECTION_CLOSE);
    return WebClientServiceResponse.builder(res)
        .headers(ClientResponseHeaders.create(closing))
        .build();
  }

  @Override
  public String type() {
    return "kvrouter-close-unframed";
  }
}
