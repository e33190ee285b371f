/**
 * The HTTP edge of the router service: everything between Helidon's sockets and an endpoint's work.
 * {@link io.kvrouter.server.http.HttpPlumbing} routes each request through one handler (bearer
 * token, the 503 of a server not serving yet, 404 and 405, the mapping of {@link
 * io.kvrouter.server.http.ApiException} refusals to {@code {"error": ...}} answers, request
 * metrics), reads request bodies whole under a per-body limit and a server-wide memory budget
 * (strict UTF-8, chunked decoding), checks each request's framing before Helidon routes it, cuts
 * off slow clients with a read deadline and answers requests Helidon refuses before routing. The
 * endpoints (io.kvrouter.server) only parse, act and write; docs/service.md, "The HTTP edge",
 * describes the behaviour.
 */
package io.kvrouter.server.http;
