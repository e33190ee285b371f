package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * A {@code /route} request id that the router could not track or a URL could not name is a 400 that
 * changes nothing; {@code tenant_id}, Dynamo's name for {@code routing_group}, works as a query
 * parameter as it does in bodies.
 */
class RequestIdAndGroupParamTest {
  private static final String REGISTER =
      "{\"instance_id\":7,\"model_name\":\"t\",\"routing_group\":\"g\",\"block_size\":4}";

  private static String route(String idJson) {
    return "{\"model_name\":\"t\",\"routing_group\":\"g\",\"request_id\":"
        + idJson
        + ",\"token_ids\":[1,2,3,4,5,6,7,8]}";
  }

  @Test
  void requestIdsThatCannotBeTrackedOrNamedAreA400() {
    try (HttpFixture a = new HttpFixture()) {
      assertThat(a.post("/register", REGISTER).status()).isEqualTo(201);
      HttpFixture.Reply peer = a.post("/route", route("\"\\u0001peer\\u0001x\""));
      assertThat(peer.status()).isEqualTo(400);
      assertThat(peer.body()).contains("request_id").contains("U+0001");
      HttpFixture.Reply lone = a.post("/route", route("\"\\udc00\\ud800\""));
      assertThat(lone.status()).isEqualTo(400);
      assertThat(lone.body()).contains("request_id").contains("surrogate");
      // a pair is fine, and freed by its URL
      HttpFixture.Reply pair = a.post("/route", route("\"r\\ud83d\\ude00\""));
      assertThat(pair.status()).isEqualTo(200);
      assertThat(a.post("/requests/r%F0%9F%98%80/free?model_name=t", "").status()).isEqualTo(200);
      assertThat(a.post("/requests/r%F0%9F%98%80/free?model_name=t", "").status()).isEqualTo(404);
    }
  }

  @Test
  void tenantIdIsTheRoutingGroupInQueryParametersToo() {
    try (HttpFixture a = new HttpFixture()) {
      assertThat(a.post("/register", REGISTER).status()).isEqualTo(201);
      assertThat(a.get("/workers?model_name=t&tenant_id=g").body()).contains("\"instance_id\":7");
      assertThat(a.get("/workers?model_name=t&tenant_id=nope").body()).isEqualTo("[]\n");
      HttpFixture.Reply both = a.get("/workers?model_name=t&routing_group=g&tenant_id=h");
      assertThat(both.status()).isEqualTo(400);
      assertThat(both.body()).contains("disagree");
      HttpFixture.Reply events =
          a.post(
              "/events?model_name=t&tenant_id=g",
              "[{\"worker_id\":7,\"event\":{\"event_id\":1,\"data\":\"cleared\"}}]");
      assertThat(events.status()).isEqualTo(200);
      assertThat(a.post("/route", route("\"q\"")).status()).isEqualTo(200);
      // another group has no such request in flight: not freed there
      assertThat(a.post("/requests/q/free?model_name=t&tenant_id=nope", "").status())
          .isEqualTo(404);
      assertThat(a.post("/requests/q/free?model_name=t&tenant_id=g", "").status()).isEqualTo(200);
      assertThat(a.post("/requests/q/free?model_name=t&tenant_id=g", "").status()).isEqualTo(404);
    }
  }
}
