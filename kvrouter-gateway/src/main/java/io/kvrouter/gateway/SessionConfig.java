package io.kvrouter.gateway;

import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Session affinity (docs/gateway.md, "Sessions"): where a request's session key comes from, how
 * long a session stays bound to its engine without a turn, how many sessions a gateway keeps, and
 * how strongly the binding holds.
 *
 * @param mode {@link Mode#OFF} (the default), {@link Mode#SOFT} or {@link Mode#HARD}
 * @param source where the key is read
 * @param header the header holding the key, for {@link Source#HEADER}; null otherwise
 * @param ttl a session with no turn for this long is forgotten
 * @param maxKeys the most sessions this gateway holds (over every model); past it the ones least
 *     likely to come back are evicted (Caffeine's policy) and counted
 */
public record SessionConfig(Mode mode, Source source, String header, Duration ttl, long maxKeys) {

  /** How a session holds to its engine. */
  public enum Mode {
    /** No session affinity. */
    OFF,
    /**
     * The binding is one more term of the cost (the {@code session} scorer): the session's engine
     * wins unless another one is cheaper by more than the term's weight, or it is busy.
     */
    SOFT,
    /** Always the session's engine while it is healthy; elsewhere (and bound anew) when not. */
    HARD
  }

  /** Where the session key is read. */
  public enum Source {
    /** A request header ({@link #header()}). */
    HEADER,
    /** The body's OpenAI {@code user} field. */
    USER,
    /**
     * The body's {@code previous_response_id} (OpenAI's Responses API): a turn goes where the
     * response it continues was answered, and its own answer's {@code id} is bound there too.
     */
    PREVIOUS_RESPONSE_ID
  }

  private static final Pattern TOKEN = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");

  /** The default TTL, 30 minutes. */
  public static final Duration DEFAULT_TTL = Duration.ofMinutes(30);

  /** The default bound, 100,000 sessions. */
  public static final long DEFAULT_MAX_KEYS = 100_000;

  /** The longest session key accepted, in characters; a longer one is a 400. */
  public static final int MAX_KEY_CHARS = 256;

  /** Session affinity off. */
  public static final SessionConfig OFF =
      new SessionConfig(Mode.OFF, Source.HEADER, "x-session-id", DEFAULT_TTL, DEFAULT_MAX_KEYS);

  public SessionConfig {
    Objects.requireNonNull(mode, "mode");
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(ttl, "ttl");
    if (source == Source.HEADER) {
      if (header == null || !TOKEN.matcher(header).matches()) {
        throw new IllegalArgumentException(
            "session key header '" + header + "' is not a valid HTTP header name");
      }
      header = header.toLowerCase(Locale.ROOT);
    } else {
      header = null;
    }
    if (ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("session TTL must be > 0, got " + ttl);
    }
    if (maxKeys < 1) {
      throw new IllegalArgumentException("session key bound must be >= 1, got " + maxKeys);
    }
  }

  /**
   * The source written as the flag takes it: {@code header:NAME}, {@code user} or {@code
   * previous_response_id}.
   *
   * @throws IllegalArgumentException naming the accepted forms
   */
  public static SessionConfig withSource(Mode mode, String source, Duration ttl, long maxKeys) {
    String s = source == null ? "" : source.trim();
    if (s.equals("user")) return new SessionConfig(mode, Source.USER, null, ttl, maxKeys);
    if (s.equals("previous_response_id")) {
      return new SessionConfig(mode, Source.PREVIOUS_RESPONSE_ID, null, ttl, maxKeys);
    }
    if (s.startsWith("header:") && s.length() > "header:".length()) {
      return new SessionConfig(mode, Source.HEADER, s.substring("header:".length()), ttl, maxKeys);
    }
    throw new IllegalArgumentException(
        "session key source '"
            + source
            + "': expected header:NAME (e.g. header:x-session-id), user or previous_response_id");
  }

  /** Whether affinity is on. */
  public boolean on() {
    return mode != Mode.OFF;
  }

  /** The source as the flag writes it. */
  public String describeSource() {
    return switch (source) {
      case HEADER -> "header:" + header;
      case USER -> "user";
      case PREVIOUS_RESPONSE_ID -> "previous_response_id";
    };
  }
}
