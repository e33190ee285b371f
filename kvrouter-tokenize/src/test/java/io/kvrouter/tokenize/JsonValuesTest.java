package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link JsonValues#read}: a value in the middle of a document, as the gateway reads one. */
class JsonValuesTest {
  @Test
  void readsTheValueAtTheCurrentTokenAndStopsOnItsLastToken() throws Exception {
    String doc =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"n\":7,\"big\":123456789012345678901,"
            + "\"f\":2.5,\"ok\":true,\"no\":false,\"none\":null,\"list\":[1,[]]}],\"after\":1}";
    try (JsonParser p = new JsonFactory().createParser(doc)) {
      JsonToken t;
      while ((t = p.nextToken()) != JsonToken.FIELD_NAME || !p.currentName().equals("messages")) {
        assertThat(t).isNotNull();
      }
      assertThat(p.nextToken()).isEqualTo(JsonToken.START_ARRAY);
      Object v = JsonValues.read(p);
      assertThat(p.currentToken()).isEqualTo(JsonToken.END_ARRAY);
      assertThat(p.nextToken()).isEqualTo(JsonToken.FIELD_NAME);
      assertThat(p.currentName()).isEqualTo("after");

      Map<String, Object> m = new LinkedHashMap<>();
      m.put("role", "user");
      m.put("n", 7L);
      m.put("big", new BigInteger("123456789012345678901"));
      m.put("f", 2.5);
      m.put("ok", true);
      m.put("no", false);
      m.put("none", null);
      m.put("list", List.of(1L, List.of()));
      assertThat(v).isEqualTo(List.of(m));
      Map<?, ?> got = (Map<?, ?>) ((List<?>) v).get(0);
      assertThat(List.copyOf(got.keySet()))
          .isEqualTo(Arrays.asList("role", "n", "big", "f", "ok", "no", "none", "list"));
      assertThat(got.get("n")).isInstanceOf(Long.class);
    }
  }
}
