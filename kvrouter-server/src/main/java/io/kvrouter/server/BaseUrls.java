package io.kvrouter.server;

import io.kvrouter.server.http.ApiException;
import java.net.URI;
import java.net.URISyntaxException;

/**
 * Checks and normalises the {@code base_url} of {@code POST /register}: the engine's OpenAI HTTP
 * address as the gateway reaches it ({@code http://10.0.0.5:8000}), without a trailing slash or
 * {@code /v1} (the gateway adds {@code /v1/...} itself). Stateless.
 */
final class BaseUrls {
  private BaseUrls() {}

  /** Why {@code url} cannot be a base URL, or null when it can. */
  static String problem(String url) {
    URI u;
    try {
      u = new URI(url);
    } catch (URISyntaxException e) {
      return "not a URL: '" + url + "' (" + e.getReason() + ")";
    }
    if (!"http".equalsIgnoreCase(u.getScheme()) && !"https".equalsIgnoreCase(u.getScheme())) {
      return "'" + url + "' is not an http:// or https:// URL (e.g. http://10.0.0.5:8000)";
    }
    if (u.getHost() == null || u.getHost().isEmpty()) {
      return "'" + url + "' has no host (e.g. http://10.0.0.5:8000)";
    }
    if (u.getQuery() != null || u.getFragment() != null || u.getUserInfo() != null) {
      return "'" + url + "' has a query, fragment or user info: give scheme, host and port only";
    }
    if (u.getPort() == 0 || u.getPort() > 65535) {
      return "'" + url + "' has port " + u.getPort() + "; a port is 1 to 65535";
    }
    return null;
  }

  /** {@code url} without trailing slashes and without a trailing {@code /v1}. */
  static String normalize(String url) {
    String s = url.replaceAll("/+$", "");
    if (s.endsWith("/v1")) s = s.substring(0, s.length() - 3);
    return s.replaceAll("/+$", "");
  }

  /** {@link #normalize} of a valid URL (null stays null); a 400 for another. */
  static String check(String url) {
    if (url == null) return null;
    String why = problem(url);
    if (why != null) throw ApiException.badRequest("base_url: " + why);
    return normalize(url);
  }
}
