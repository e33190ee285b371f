package io.kvrouter.server.http;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import org.jspecify.annotations.Nullable;

/**
 * The optional bearer token of mutating endpoints. Compares in constant time: both the expected and
 * the presented token are hashed with SHA-256 and the digests compared with {@link
 * MessageDigest#isEqual}, so neither the position of the first differing byte nor the token's
 * length shows in the time taken. Immutable, thread-safe.
 *
 * <pre>
 * Implementation notes
 *
 * expected holds the SHA-256 of the token, or null when none is configured (then every request
 * is permitted); set once by the constructor, read by every request thread of the mutating
 * endpoints (HttpPlumbing.handler). The scheme name is matched case-insensitively and the token
 * trimmed, as RFC 6750 clients send it.
 * </pre>
 */
final class BearerAuth {
  private static final String PREFIX = "bearer ";

  private final byte @Nullable []
      expected; // SHA-256 of the token, or null when no token is required

  BearerAuth(String token) {
    this.expected = token == null || token.isEmpty() ? null : sha256(token);
  }

  /** Whether a token is required. */
  boolean enabled() {
    return expected != null;
  }

  /** Whether an {@code Authorization} header value (or null) grants access. */
  boolean permits(String authorization) {
    if (expected == null) return true;
    if (authorization == null
        || authorization.length() < PREFIX.length()
        || !authorization.regionMatches(true, 0, PREFIX, 0, PREFIX.length())) {
      return false;
    }
    return MessageDigest.isEqual(expected, sha256(authorization.substring(PREFIX.length()).trim()));
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }
}
