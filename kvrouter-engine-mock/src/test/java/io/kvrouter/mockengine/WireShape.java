package io.kvrouter.mockengine;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * Compares a JSON body with a recorded vLLM shape (src/test/resources/vllm-wire): the same keys in
 * the same order, the same values, {@code "<string>"}, {@code "<int>"} and {@code "<number>"}
 * matching any value of that type.
 */
final class WireShape {
  private WireShape() {}

  static JsonNode fixture(String name) {
    try (InputStream in = WireShape.class.getResourceAsStream("/vllm-wire/" + name)) {
      if (in == null) throw new AssertionError("no fixture " + name);
      return EngineHttp.JSON.readTree(in);
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  static void assertMatches(JsonNode expected, JsonNode actual) {
    List<String> problems = new ArrayList<>();
    compare("$", expected, actual, problems);
    if (!problems.isEmpty()) {
      throw new AssertionError(
          String.join("\n", problems) + "\nexpected shape: " + expected + "\nactual: " + actual);
    }
  }

  private static void compare(String path, JsonNode e, JsonNode a, List<String> out) {
    if (a == null) {
      out.add(path + ": missing");
      return;
    }
    if (e.isTextual()) {
      switch (e.textValue()) {
        case "<string>" -> {
          if (!a.isTextual()) out.add(path + ": expected a string, got " + a);
          return;
        }
        case "<int>" -> {
          if (!a.isIntegralNumber()) out.add(path + ": expected an integer, got " + a);
          return;
        }
        case "<number>" -> {
          if (!a.isNumber()) out.add(path + ": expected a number, got " + a);
          return;
        }
        default -> {}
      }
    }
    if (e.isObject()) {
      if (!a.isObject()) {
        out.add(path + ": expected an object, got " + a);
        return;
      }
      List<String> ek = keys(e);
      List<String> ak = keys(a);
      if (!ek.equals(ak)) out.add(path + ": keys " + ak + ", expected " + ek);
      for (String k : ek) compare(path + "." + k, e.get(k), a.get(k), out);
      return;
    }
    if (e.isArray()) {
      if (!a.isArray() || a.size() != e.size()) {
        out.add(path + ": expected an array of " + e.size() + ", got " + a);
        return;
      }
      for (int i = 0; i < e.size(); i++) compare(path + "[" + i + "]", e.get(i), a.get(i), out);
      return;
    }
    if (!e.equals(a)) out.add(path + ": " + a + ", expected " + e);
  }

  private static List<String> keys(JsonNode n) {
    List<String> k = new ArrayList<>();
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) k.add(it.next());
    return k;
  }
}
