package io.kvrouter.transport.kvevents;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a JSON document into plain Java values (Map, List, String, Long, Double, Boolean, null)
 * with jackson-core's streaming parser; the transport module has no databind.
 */
final class MiniJson {
  private MiniJson() {}

  static Object read(String resource) {
    try (InputStream in = MiniJson.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("missing test resource " + resource);
      }
      try (JsonParser p = new JsonFactory().createParser(in)) {
        return value(p, p.nextToken());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Object value(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case START_OBJECT -> {
        Map<String, Object> m = new LinkedHashMap<>();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String name = p.currentName();
          m.put(name, value(p, p.nextToken()));
        }
        return m;
      }
      case START_ARRAY -> {
        List<Object> l = new ArrayList<>();
        JsonToken x;
        while ((x = p.nextToken()) != JsonToken.END_ARRAY) {
          l.add(value(p, x));
        }
        return l;
      }
      case VALUE_STRING -> {
        return p.getText();
      }
      case VALUE_NUMBER_INT -> {
        return p.getLongValue();
      }
      case VALUE_NUMBER_FLOAT -> {
        return p.getDoubleValue();
      }
      case VALUE_TRUE -> {
        return true;
      }
      case VALUE_FALSE -> {
        return false;
      }
      case VALUE_NULL -> {
        return null;
      }
      default -> throw new IllegalStateException("unexpected token " + t);
    }
  }
}
