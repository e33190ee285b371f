package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.http.ApiException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The token_ids fast path gives exactly what the ordinary Jackson path gives: the same values, or
 * the same error message, on seeded random and adversarial bodies.
 */
class JsonBodyTest {

  /** token_ids and model_name of a body, or the 400 message. */
  private static String read(String body, boolean fast) {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    try {
      return JsonBody.parse(
          bytes,
          fast,
          b -> {
            int[] tokens = null;
            String model = null;
            while (b.nextField()) {
              switch (b.name()) {
                case "token_ids" -> tokens = b.tokenIds();
                case "model_name" -> model = b.string();
                default -> b.skip();
              }
            }
            return model + " " + Arrays.toString(tokens);
          });
    } catch (ApiException e) {
      return e.status() + " " + e.getMessage();
    }
  }

  private static void same(String body) {
    assertThat(read(body, true)).as(body).isEqualTo(read(body, false));
  }

  @Test
  void prescanReadsPlainArraysAndLeavesEverythingElseToJackson() {
    JsonBody.Prescan p = JsonBody.prescanTokenIds(bytes("{\"token_ids\":[1, 2 ,3],\"x\":1}"));
    assertThat(p.values()).containsExactly(1, 2, 3);
    assertThat(p.open()).isEqualTo(13);
    assertThat(p.close()).isEqualTo(21);
    assertThat(JsonBody.prescanTokenIds(bytes(" {\"a\":\"token_ids\",\"token_ids\":[]}")).values())
        .isEmpty();
    assertThat(JsonBody.prescanTokenIds(bytes("{\"token_ids\":[4294967295,0]}")).values())
        .containsExactly(-1, 0);
    for (String s :
        new String[] {
          "{\"token_ids\":[4294967296]}",
          "{\"token_ids\":[-1]}",
          "{\"token_ids\":[01]}",
          "{\"token_ids\":[1.0]}",
          "{\"token_ids\":[1e3]}",
          "{\"token_ids\":[1,]}",
          "{\"token_ids\":[,1]}",
          "{\"token_ids\":[1 2]}",
          "{\"token_ids\":[1,2",
          "{\"token_ids\":\"[1]\"}",
          "{\"nested\":{\"token_ids\":[1]}}",
          "{\"token\\u005fids\":[1]}",
          "[{\"token_ids\":[1]}]",
          "{\"s\":\"\\\"token_ids\\\":[1]\"}",
        }) {
      assertThat(JsonBody.prescanTokenIds(bytes(s))).as(s).isNull();
    }
  }

  @Test
  void bothPathsAgreeOnAdversarialBodies() {
    for (String s :
        new String[] {
          "{\"model_name\":\"m\",\"token_ids\":[1,2,3]}",
          "{\"token_ids\":[1,2,3],\"model_name\":\"m\"}",
          "{\"token_ids\" :\n [ 1 ,\n 2 ] , \"model_name\" : \"m\" }",
          "{\"token_ids\":[1],\"token_ids\":[2]}",
          "{\"token_ids\":[1],\"model_name\":\"m\"} x",
          "{\"token_ids\":[1],\"model_name\":\"m\"",
          "{\"token_ids\":[1]\n,\"model_name\":5}",
          "{\"token_ids\":[1,2],\n\n\"model_name\":\"m\",\"x\":[1,}",
          "{\"s\":\"a\\\\\",\"token_ids\":[7]}",
          "{\"token\\u005fids\":[1]}",
          "{\"model_name\":\"token_ids\",\"token_ids\":[9]}",
          "{\"token_ids\":[4294967296]}",
          "{\"token_ids\":[-1]}",
          "{\"token_ids\":[00]}",
          "{\"token_ids\":[]}",
          "{\"token_ids\":[   ]}",
          "{\"token_ids\":{}}",
        }) {
      same(s);
    }
  }

  @Test
  void bothPathsAgreeOnRandomBodies() {
    long seed = new Random().nextLong();
    Random rnd = new Random(seed);
    String[] pieces = {"1", "0", "4294967295", "4294967296", "-3", "07", "2.5", "1e2", "\"x\"", ""};
    String[] ws = {"", " ", "\n", "\t", " \r\n "};
    for (int i = 0; i < 2000; i++) {
      StringBuilder arr = new StringBuilder("[");
      int n = rnd.nextInt(6);
      for (int k = 0; k < n; k++) {
        if (k > 0) arr.append(rnd.nextInt(20) == 0 ? "" : ",");
        arr.append(ws[rnd.nextInt(ws.length)]);
        arr.append(
            rnd.nextInt(4) == 0
                ? pieces[rnd.nextInt(pieces.length)]
                : Long.toString(rnd.nextLong() & 0xFFFF_FFFFL));
        arr.append(ws[rnd.nextInt(ws.length)]);
      }
      arr.append(rnd.nextInt(30) == 0 ? "" : "]");
      String body =
          rnd.nextBoolean()
              ? "{\"model_name\":\"m\"," + ws[rnd.nextInt(ws.length)] + "\"token_ids\":" + arr + "}"
              : "{\"token_ids\":" + ws[rnd.nextInt(ws.length)] + arr + ",\"model_name\":\"m\"}";
      assertThat(read(body, true)).as("seed " + seed + ": " + body).isEqualTo(read(body, false));
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
