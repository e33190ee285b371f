package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.ByteArrayInputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Bad input: every refusal has the right status and an {"error": ...} that names the problem. */
class ServiceErrorsTest {
  private static final int BS = 4;
  private final HttpFixture http = new HttpFixture();

  @AfterEach
  void stop() {
    http.close();
  }

  private static void assertError(HttpFixture.Reply r, int status, String... fragments) {
    assertThat(r.status()).as(r.toString()).isEqualTo(status);
    assertThat(r.header("Content-Type")).as(r.toString()).startsWith("application/json");
    assertThat(r.body()).as(r.toString()).startsWith("{\"error\":\"");
    for (String f : fragments) assertThat(r.body()).as(r.toString()).contains(f);
  }

  @Test
  void registrationConflictsAre409WithAMessage() {
    assertThat(http.register(1, 0, "m", 16).status()).isEqualTo(201);
    assertError(
        http.register(2, 0, "m", 32),
        409,
        "uses block_size 16",
        "asks for 32",
        "model 'm' (routing group 'default')");
    assertError(http.register(1, 0, "m", 16), 409, "instance 1 dp_rank 0 is already registered");
    // another rank, another group, another model: no conflict
    assertThat(http.register(1, 1, "m", 16).status()).isEqualTo(201);
    assertThat(
            http.post(
                    "/register",
                    "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":32,"
                        + "\"routing_group\":\"g2\"}")
                .status())
        .isEqualTo(201);
    assertThat(http.register(1, 0, "m2", 32).status()).isEqualTo(201);
  }

  @Test
  void missingFieldsAndWrongTypesAre400NamingTheField() {
    assertError(
        http.post("/register", "{\"model_name\":\"m\",\"block_size\":4}"),
        400,
        "instance_id: missing required field");
    assertError(
        http.post("/register", "{\"instance_id\":1,\"block_size\":4}"),
        400,
        "model_name: missing required field");
    assertError(
        http.post("/register", "{\"instance_id\":1,\"model_name\":\"m\"}"),
        400,
        "block_size: missing required field");
    assertError(
        http.post("/register", "{\"instance_id\":\"1\",\"model_name\":\"m\",\"block_size\":4}"),
        400,
        "instance_id: expected an unsigned 64-bit integer, found the string \\\"1\\\"",
        "line 1, column 16");
    assertError(
        http.post("/register", "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":0}"),
        400,
        "block_size: expected an integer in 1..1048576, found 0");
    assertError(
        http.post("/register", "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4.5}"),
        400,
        "block_size",
        "non-integer number 4.5");
    assertError(
        http.post(
            "/register",
            "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,\"dp_rank\":-1}"),
        400,
        "dp_rank: expected an integer in 0..2147483647");
    assertError(
        http.post("/register", "{\"instance_id\":1,\"model_name\":\"\",\"block_size\":4}"),
        400,
        "model_name: must not be empty");
    assertError(
        http.post(
            "/register",
            "{\"instance_id\":18446744073709551616,\"model_name\":\"m\",\"block_size\":4}"),
        400,
        "instance_id: integer 18446744073709551616 is outside the 64-bit range");
    assertError(
        http.post(
            "/register",
            "{\"instance_id\":1,\"instance_id\":2,\"model_name\":\"m\",\"block_size\":4}"),
        400,
        "instance_id: duplicate field");
    assertError(
        http.post(
            "/register",
            "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4,"
                + "\"routing_group\":\"a\",\"tenant_id\":\"b\"}"),
        400,
        "routing_group and tenant_id",
        "disagree");
    assertError(http.post("/unregister", "{\"model_name\":\"m\"}"), 400, "instance_id: missing");
    assertError(
        http.post("/query", "{\"model_name\":\"m\"}"), 400, "token_ids: missing required field");
    assertError(
        http.post("/query", "{\"token_ids\":[1]}"), 400, "model_name: missing required field");
    assertError(
        http.post("/query_by_hash", "{\"model_name\":\"m\",\"block_hashes\":[1.5]}"),
        400,
        "block_hashes[0]: expected an unsigned 64-bit integer");
    assertError(
        http.post("/route", "{\"model_name\":\"m\",\"token_ids\":[1]}"),
        400,
        "request_id: missing required field");
    assertError(
        http.post(
            "/route",
            "{\"request_id\":\"" + "x".repeat(513) + "\",\"model_name\":\"m\",\"token_ids\":[1]}"),
        400,
        "request_id: longer than 512 characters");
    // nothing was registered by any of these
    assertThat(http.get("/workers").body()).isEqualTo("[]\n");
  }

  @Test
  void tokenIdsOutsideTheUnsigned32BitRangeAre400() {
    http.register(1, 0, "m", BS);
    assertThat(http.query("m", new int[] {0, -1}).status()).isEqualTo(200); // 4294967295 is valid
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[1,2,-1]}"),
        400,
        "token_ids[2]: token id -1 is outside 0..4294967295");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[4294967296]}"),
        400,
        "token_ids[0]: token id 4294967296 is outside 0..4294967295");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[99999999999999999999999]}"),
        400,
        "token_ids[0]: token id 99999999999999999999999 is outside");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[1,\"2\"]}"),
        400,
        "token_ids[1]: expected a token id in 0..4294967295, found the string");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[1,2.0]}"),
        400,
        "token_ids[1]",
        "non-integer number 2.0");
    assertError(
        http.post("/route", "{\"request_id\":\"r\",\"model_name\":\"m\",\"token_ids\":{}}"),
        400,
        "token_ids: expected an array of token ids, found an object");
  }

  @Test
  void malformedJsonIs400WithALocation() {
    assertError(http.post("/query", ""), 400, "the request body is empty");
    assertError(http.post("/query", "[1,2]"), 400, "$: expected a JSON object, found an array");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[1,2"),
        400,
        "malformed JSON",
        "line 1");
    assertError(http.post("/query", "{\"model_name\" \"m\"}"), 400, "malformed JSON");
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"token_ids\":[]} {}"),
        400,
        "expected the end of the input");
    assertError(
        http.post("/register", "{\"instance_id\":1,\n\"model_name\":\"m\",\n\"block_size\":x}"),
        400,
        "malformed JSON",
        "line 3");
    String deep = "{\"x\":" + "[".repeat(100) + "]".repeat(100) + "}";
    assertError(http.post("/query", deep), 400, "malformed JSON", "nesting depth");
    assertError(
        http.post("/query", "\u00ff\u00fe{"), 400, "malformed JSON"); // not a JSON start at all
  }

  @Test
  void unknownModelsAre404() {
    assertError(
        http.query("nope", range(0, 4)),
        404,
        "unknown model 'nope' (routing group 'default')",
        "POST /register");
    assertError(http.post("/query_by_hash", "{\"model_name\":\"nope\",\"block_hashes\":[1]}"), 404);
    assertError(
        http.post("/route", "{\"request_id\":\"r\",\"model_name\":\"nope\",\"token_ids\":[1]}"),
        404,
        "unknown model 'nope'");
    assertError(http.post("/events?model_name=nope", "[]"), 404, "unknown model 'nope'");
    http.register(1, 0, "m", BS);
    assertError(
        http.post("/query", "{\"model_name\":\"m\",\"routing_group\":\"g\",\"token_ids\":[]}"),
        404,
        "routing group 'g'");
    assertError(
        http.post("/unregister", "{\"instance_id\":2,\"model_name\":\"m\"}"),
        404,
        "instance 2 is not registered for model 'm'");
  }

  @Test
  void anEventBatchIsAppliedWholeOrNotAtAll() {
    http.register(1, 0, "m", BS);
    String good = RouterEventJson.writeEvent(stored(new Worker(1, 0), 0, range(0, 8), BS));
    // a decode error in the last event: nothing applied, the error names the event and field
    HttpFixture.Reply bad =
        http.post(
            "/events?model_name=m",
            "["
                + good
                + ",\n{\"worker_id\":1,\"event\":{\"event_id\":\"x\",\"data\":\"cleared\"}}]");
    assertError(bad, 400, "events: [1].event.event_id", "line 2", "nothing was applied");
    assertThat(http.query("m", range(0, 8)).body()).startsWith("{\"scores\":{}");
    // an unregistered worker anywhere: 404 naming it, nothing applied
    HttpFixture.Reply unknown =
        http.events(
            "m",
            list(
                stored(new Worker(1, 0), 0, range(0, 8), BS),
                stored(new Worker(1, 1), 0, range(0, 8), BS)));
    assertError(
        unknown, 404, "event [1]: instance 1 dp_rank 1 is not registered", "nothing was applied");
    assertThat(http.query("m", range(0, 8)).body()).startsWith("{\"scores\":{}");
    assertError(http.post("/events", "[]"), 400, "model_name: missing query parameter");
    assertError(http.post("/events?model_name=m", ""), 400, "body is empty");
    assertError(http.post("/events?model_name=m", "{}"), 400, "expected an array of events");
    // the valid batch alone goes through
    assertThat(http.post("/events?model_name=m", "[" + good + "]").status()).isEqualTo(200);
    assertThat(http.query("m", range(0, 8)).body()).startsWith("{\"scores\":{\"1\":{\"0\":8}}");
  }

  @Test
  void unknownPathsAre404AndWrongMethods405() {
    assertError(http.get("/nope"), 404, "no endpoint GET /nope");
    HttpFixture.Reply r = http.get("/query");
    assertError(r, 405, "GET is not allowed on /query; use POST");
    assertThat(r.header("Allow")).isEqualTo("POST");
    assertError(http.post("/health", "{}"), 405, "use GET");
    assertError(http.get("/requests/x/free"), 405);
  }

  @Test
  void aBodyJustOverTheLimitIs413AndTheServerKeepsServing() {
    int limit = 4096;
    try (HttpFixture small = new HttpFixture(KvRouterServer.Config.builder().maxBodyBytes(limit))) {
      small.register(1, 0, "m", BS);
      String prefix = "{\"model_name\":\"m\",\"token_ids\":[";
      StringBuilder sb = new StringBuilder(prefix);
      while (sb.length() < limit - 3) sb.append("1,");
      sb.append("1]}");
      while (sb.length() < limit) sb.insert(prefix.length(), ' ');
      String atLimit = sb.toString();
      assertThat(atLimit.getBytes(StandardCharsets.UTF_8)).hasSize(limit);
      assertThat(small.post("/query", atLimit).status()).isEqualTo(200);
      String overLimit = atLimit.replace("[", "[ ");
      assertThat(overLimit.getBytes(StandardCharsets.UTF_8)).hasSize(limit + 1);
      assertError(small.post("/query", overLimit), 413, "larger than the limit of 4096 bytes");
      // without a declared length (chunked), the limit is found while reading
      byte[] chunked = overLimit.getBytes(StandardCharsets.UTF_8);
      HttpFixture.Reply c =
          small.send(
              HttpRequest.newBuilder(URI.create(small.url + "/query"))
                  .POST(
                      HttpRequest.BodyPublishers.ofInputStream(
                          () -> new ByteArrayInputStream(chunked))));
      assertError(c, 413, "larger than the limit");
      assertThat(small.post("/query", atLimit).status()).isEqualTo(200);
      assertThat(small.get("/health").status()).isEqualTo(200);
    }
  }

  @Test
  void aTokenGuardsEveryMutatingEndpointAndOnlyThose() {
    try (HttpFixture secured =
        new HttpFixture(KvRouterServer.Config.builder().authToken("s3cret"))) {
      String reg = "{\"instance_id\":1,\"model_name\":\"m\",\"block_size\":4}";
      HttpFixture.Reply none = secured.post("/register", reg);
      assertError(none, 401, "Authorization: Bearer");
      assertThat(none.header("WWW-Authenticate")).startsWith("Bearer");
      secured.token = "s3cre";
      assertError(secured.post("/register", reg), 401);
      secured.token = "s3cret-";
      assertError(secured.post("/register", reg), 401);
      secured.token = "s3cret";
      assertThat(secured.post("/register", reg).status()).isEqualTo(201);
      String route = "{\"request_id\":\"r\",\"model_name\":\"m\",\"token_ids\":[1,2,3,4]}";
      secured.token = null;
      assertError(secured.post("/route", route), 401);
      assertError(secured.post("/events?model_name=m", "[]"), 401);
      assertError(secured.post("/requests/r/free", ""), 401);
      assertError(secured.post("/requests/r/prefill_complete", ""), 401);
      assertError(secured.post("/unregister", "{\"instance_id\":1,\"model_name\":\"m\"}"), 401);
      // reads need no token
      assertThat(secured.query("m", range(0, 4)).status()).isEqualTo(200);
      assertThat(
              secured.post("/query_by_hash", "{\"model_name\":\"m\",\"block_hashes\":[]}").status())
          .isEqualTo(200);
      assertThat(secured.get("/workers").status()).isEqualTo(200);
      assertThat(secured.get("/dump").status()).isEqualTo(200);
      assertThat(secured.get("/metrics").status()).isEqualTo(200);
      secured.token = "s3cret";
      assertThat(secured.post("/route", route).status()).isEqualTo(200);
      assertThat(secured.post("/requests/r/free", "").status()).isEqualTo(200);
      // the configuration never shows the token
      assertThat(secured.server.config().toString()).doesNotContain("s3cret").contains("******");
    }
  }
}
