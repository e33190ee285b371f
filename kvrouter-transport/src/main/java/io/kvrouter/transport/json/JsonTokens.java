package io.kvrouter.transport.json;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;

/**
 * How error messages name a JSON token ("an object", "the string \"abc\"", "the integer 12"), the
 * same for the event codec and the server's request bodies.
 */
public final class JsonTokens {
  private JsonTokens() {}

  /**
   * Names token {@code t}, the one {@code p} is on, for an error message; a long text is cut to 40
   * characters. The caller names the end of the input ({@code t == null}) its own way.
   */
  public static String describe(JsonParser p, JsonToken t) throws IOException {
    return switch (t) {
      case START_OBJECT -> "an object";
      case START_ARRAY -> "an array";
      case VALUE_STRING -> "the string \"" + abbreviate(p.getText()) + "\"";
      case VALUE_NUMBER_FLOAT -> "the non-integer number " + abbreviate(p.getText());
      case VALUE_NUMBER_INT -> "the integer " + abbreviate(p.getText());
      case VALUE_NULL -> "null";
      case VALUE_TRUE -> "true";
      case VALUE_FALSE -> "false";
      default -> t.name();
    };
  }

  /** {@code s} cut to 40 characters, the last three "...". */
  public static String abbreviate(String s) {
    return s.length() <= 40 ? s : s.substring(0, 37) + "...";
  }
}
