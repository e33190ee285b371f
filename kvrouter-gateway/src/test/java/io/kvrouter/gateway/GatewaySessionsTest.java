package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayMockEngineTest.BS;
import static io.kvrouter.gateway.GatewayMockEngineTest.await;
import static io.kvrouter.gateway.GatewayMockEngineTest.post;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.Scorers;
import io.kvrouter.route.WorkerSelector;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.transport.nats.NatsServer;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Session affinity across three gateways synced over one real nats-server, with three mock engines
 * that publish no KV events (so the router predicts their caches, and a turn whose prompt shares
 * nothing with the last one has no cache to follow): each session's turns, sent to the three
 * gateways in turn, stay on one engine; and a flood of one-turn sessions leaves no gateway with
 * more than its bound of keys, the rest counted as evictions.
 *
 * <p>Between turns the test waits until every gateway holds the session's binding (an observable
 * state, not a delay): a turn that reaches another gateway before the binding does is routed as a
 * new session there (docs/gateway.md says so).
 */
class GatewaySessionsTest {
  private static final int MAX_KEYS = 64;
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private MockEngineServer engine() throws Exception {
    MockEngineServer e =
        MockEngineServer.start(
            MockEngineServer.Config.builder()
                .port(0)
                .modelDir(GatewayStubTest.tiny())
                .servedModelName("tiny")
                .blockSize(BS)
                .numGpuBlocks(4096)
                .enablePromptTokensDetails(true)
                .speedup(20)
                .defaultMaxTokens(2)
                .build());
    open.add(e);
    return e;
  }

  private Gateway gateway(String nats, SessionConfig sessions, List<MockEngineServer> engines)
      throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .sync(nats == null ? "off" : nats)
                .selector(
                    () ->
                        WorkerSelector.scored(
                            Scorers.defaults(1, 20).toBuilder().add(Scorers.SESSION, 32).build(),
                            0,
                            0))
                .build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .sessions(sessions)
                .build());
    open.add(g);
    for (int i = 0; i < engines.size(); i++) {
      g.host.register(Registration.of("tiny", BS, i + 1, 0, engines.get(i).url()));
    }
    return g;
  }

  private static String words(SplittableRandom r, int n) {
    String[] vocab = {
      "radix", "tree", "block", "cache", "engine", "prompt", "token", "route", "load", "queue",
      "session", "affinity", "gateway", "prefill", "decode", "hash", "index", "worker", "rank", "kv"
    };
    // a random hex number first, so that no two prompts share their first block (a few words of
    // a small vocabulary could, and then the cache, not the session, would choose)
    StringBuilder b =
        new StringBuilder(Long.toHexString(r.nextLong() | Long.MIN_VALUE)).append(' ');
    for (int i = 0; i < n; i++) b.append(vocab[r.nextInt(vocab.length)]).append(' ');
    return b.toString();
  }

  /** The response object's id (its first "id" field: the top level's comes first). */
  private static String idOf(String body) {
    Matcher m = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"").matcher(body);
    assertThat(m.find()).as("an id in %s", body).isTrue();
    return m.group(1);
  }

  /** A completion whose prompt is new text from its first token (nothing caches any of it). */
  private static String completion(SplittableRandom r, int turn) {
    return "{\"model\":\"tiny\",\"max_tokens\":2,\"prompt\":\""
        + words(r, 24)
        + "turn "
        + turn
        + "\"}";
  }

  private static Worker workerOf(HttpResponse<String> o) {
    return new Worker(
        Long.parseLong(o.headers().firstValue("x-kvrouter-worker").orElseThrow()),
        Integer.parseInt(o.headers().firstValue("x-kvrouter-dp-rank").orElse("0")));
  }

  @Test
  void threeSyncedGatewaysKeepEachSessionOnOneEngineWithinTheirBound() throws Exception {
    NatsServer nats = NatsServer.start();
    open.add(nats);
    List<MockEngineServer> engines = List.of(engine(), engine(), engine());
    SessionConfig hard =
        new SessionConfig(
            SessionConfig.Mode.HARD,
            SessionConfig.Source.HEADER,
            "x-session-id",
            Duration.ofHours(1),
            MAX_KEYS);
    List<Gateway> gws = new ArrayList<>();
    for (int i = 0; i < 3; i++) gws.add(gateway(nats.url(), hard, engines));
    long seed = new SplittableRandom().nextLong();
    SplittableRandom r = new SplittableRandom(seed);

    // the control: turns without a session key, each a new prompt, spread over the engines (the
    // emptiest predicted cache takes a prompt nothing caches), so keeping a session together is
    // the binding's doing
    Map<Worker, Integer> unbound = new HashMap<>();
    for (int t = 0; t < 12; t++) {
      HttpResponse<String> o = post(gws.get(t % 3).url(), "/v1/completions", completion(r, t));
      assertThat(o.statusCode()).as(o.body()).isEqualTo(200);
      unbound.merge(workerOf(o), 1, Integer::sum);
    }
    assertThat(unbound.size())
        .as("seed %d: turns without a session: %s", seed, unbound)
        .isEqualTo(3);

    // four sessions of 30 turns, each turn to the next gateway, each prompt new text
    int sessions = 4;
    int turns = 30;
    Map<String, Map<Worker, Integer>> where = new HashMap<>();
    for (int t = 0; t < turns; t++) {
      for (int s = 0; s < sessions; s++) {
        String id = "conversation-" + s;
        Gateway g = gws.get((t + s) % 3);
        HttpResponse<String> o =
            post(g.url(), "/v1/completions", completion(r, t), "x-session-id", id);
        assertThat(o.statusCode()).as("seed %d: %s", seed, o.body()).isEqualTo(200);
        Worker w = workerOf(o);
        where.computeIfAbsent(id, k -> new HashMap<>()).merge(w, 1, Integer::sum);
        String key = SessionTable.key("tiny", id);
        for (Gateway other : gws) {
          await(
              "every gateway to hold " + id + " on " + w,
              () -> {
                SessionTable.Binding b = other.sessions.table().peek(key);
                return b != null && b.worker().equals(w);
              });
        }
      }
    }
    for (Map.Entry<String, Map<Worker, Integer>> e : where.entrySet()) {
      int most = e.getValue().values().stream().mapToInt(Integer::intValue).max().orElse(0);
      assertThat(most * 100.0 / turns)
          .as("seed %d: %s's turns by engine %s", seed, e.getKey(), e.getValue())
          .isGreaterThanOrEqualTo(99.0);
    }
    assertThat(where.values().stream().map(m -> m.keySet().iterator().next()).distinct().count())
        .as("seed %d: the sessions themselves spread over the engines: %s", seed, where)
        .isGreaterThan(1);

    // a flood of one-turn sessions: every gateway sees every binding, and holds at most its bound
    int flood = 3 * MAX_KEYS;
    for (int i = 0; i < flood; i++) {
      HttpResponse<String> o =
          post(
              gws.get(i % 3).url(),
              "/v1/completions",
              "{\"model\":\"tiny\",\"max_tokens\":1,\"prompt\":\"one turn " + i + "\"}",
              "x-session-id",
              "flood-" + i);
      assertThat(o.statusCode()).as(o.body()).isEqualTo(200);
    }
    int total = sessions + flood;
    for (Gateway g : gws) {
      SessionTable t = g.sessions.table();
      await(
          "every binding to reach every gateway (held + evicted = " + total + ")",
          () -> t.size() + t.evictions() == total);
      assertThat(t.size()).isLessThanOrEqualTo(MAX_KEYS);
      assertThat(t.evictions()).isGreaterThanOrEqualTo(total - MAX_KEYS);
      String metrics =
          GatewayMockEngineTest.HTTP
              .send(
                  HttpRequest.newBuilder(URI.create(g.url() + "/metrics")).build(),
                  HttpResponse.BodyHandlers.ofString())
              .body();
      assertThat(metrics)
          .contains("kvrouter_session_evictions_total " + (double) t.evictions())
          .contains("kvrouter_session_keys " + (double) t.size());
    }
  }

  @Test
  void previousResponseIdFollowsTheResponseItContinues() throws Exception {
    List<MockEngineServer> engines = List.of(engine(), engine(), engine());
    SessionConfig byResponse =
        new SessionConfig(
            SessionConfig.Mode.HARD,
            SessionConfig.Source.PREVIOUS_RESPONSE_ID,
            null,
            Duration.ofHours(1),
            MAX_KEYS);
    Gateway g = gateway(null, byResponse, engines);
    long seed = new SplittableRandom().nextLong();
    SplittableRandom r = new SplittableRandom(seed);
    Map<Worker, Integer> firstTurns = new HashMap<>();
    for (int conversation = 0; conversation < 3; conversation++) {
      String previous = null;
      Worker first = null;
      for (int t = 0; t < 8; t++) {
        String body =
            "{\"model\":\"tiny\",\"max_tokens\":2,"
                + (previous == null ? "" : "\"previous_response_id\":\"" + previous + "\",")
                + "\"prompt\":\""
                + words(r, 24)
                + "\"}";
        HttpResponse<String> o = post(g.url(), "/v1/completions", body);
        assertThat(o.statusCode()).as("seed %d: %s", seed, o.body()).isEqualTo(200);
        Worker w = workerOf(o);
        if (first == null) {
          first = w;
          firstTurns.merge(w, 1, Integer::sum);
        }
        assertThat(w)
            .as("seed %d: conversation %d turn %d", seed, conversation, t)
            .isEqualTo(first);
        previous = idOf(o.body());
        assertThat(previous).isNotEmpty();
      }
    }
    assertThat(firstTurns.size()).as("new conversations spread: %s", firstTurns).isGreaterThan(1);
  }

  @Test
  void softModeKeepsASessionThroughTheSessionScorer() throws Exception {
    List<MockEngineServer> engines = List.of(engine(), engine(), engine());
    SessionConfig soft =
        new SessionConfig(
            SessionConfig.Mode.SOFT, SessionConfig.Source.USER, null, Duration.ofHours(1), 16);
    Gateway g = gateway(null, soft, engines);
    long seed = new SplittableRandom().nextLong();
    SplittableRandom r = new SplittableRandom(seed);
    Map<String, Map<Worker, Integer>> where = new HashMap<>();
    for (int t = 0; t < 10; t++) {
      for (int s = 0; s < 3; s++) {
        String user = "user-" + s;
        String body =
            "{\"model\":\"tiny\",\"max_tokens\":2,\"user\":\""
                + user
                + "\",\"prompt\":\""
                + words(r, 24)
                + "\"}";
        HttpResponse<String> o = post(g.url(), "/v1/completions", body);
        assertThat(o.statusCode()).as("seed %d: %s", seed, o.body()).isEqualTo(200);
        where.computeIfAbsent(user, k -> new HashMap<>()).merge(workerOf(o), 1, Integer::sum);
      }
    }
    for (Map.Entry<String, Map<Worker, Integer>> e : where.entrySet()) {
      assertThat(e.getValue()).as("seed %d: %s's turns by engine", seed, e.getKey()).hasSize(1);
    }
    // each session's own engine: the term of every other engine is the session weight
    assertThat(g.sessions.table().size()).isEqualTo(3);
  }
}
