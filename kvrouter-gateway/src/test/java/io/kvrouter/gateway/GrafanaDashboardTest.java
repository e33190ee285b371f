package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.server.KvRouterServer;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * deploy/grafana/kvrouter-dashboard.json queries only metrics that a running gateway (which is a
 * serve too) writes in GET /metrics: every metric name of every panel's PromQL expression is among
 * the sample names of /metrics after some traffic, failures and a queue (docs/observability.md,
 * "Dashboard"). A labelled metric shows in /metrics once it has a series, so the traffic is what
 * makes each one appear.
 */
class GrafanaDashboardTest {
  static final Path DASHBOARD = Path.of("..", "deploy", "grafana", "kvrouter-dashboard.json");
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  /** Every {@code expr} string of the dashboard (panel targets, at any depth). */
  static List<String> expressions(Path dashboard) throws Exception {
    List<String> out = new ArrayList<>();
    try (JsonParser p = new JsonFactory().createParser(dashboard.toFile())) {
      for (JsonToken t = p.nextToken(); t != null; t = p.nextToken()) {
        if (t == JsonToken.FIELD_NAME && p.currentName().equals("expr")) {
          assertThat(p.nextToken()).isEqualTo(JsonToken.VALUE_STRING);
          out.add(p.getText());
        }
      }
    }
    return out;
  }

  private static final Set<String> KEYWORDS =
      Set.of(
          "by",
          "without",
          "on",
          "ignoring",
          "group_left",
          "group_right",
          "bool",
          "and",
          "or",
          "unless",
          "offset",
          "inf",
          "nan");

  /**
   * The metric names a PromQL expression selects: its identifiers once string literals, label
   * matchers ({@code {...}}), range and subquery selectors ({@code [...]}) and the label lists of
   * {@code by}, {@code without}, {@code on}, {@code ignoring}, {@code group_left} and {@code
   * group_right} are taken out, less function names (followed by a parenthesis) and keywords.
   */
  static Set<String> metricNames(String expr) {
    String e = expr.replaceAll("\"(?:[^\"\\\\]|\\\\.)*\"", "\"\"");
    // numbers and durations (0.99, 1e3, 5m): not names
    e = e.replaceAll("(?<![A-Za-z0-9_:])[0-9][0-9.eE+-]*[a-z]*", " ");
    e = e.replaceAll("\\{[^}]*\\}", " ");
    e = e.replaceAll("\\[[^\\]]*\\]", " ");
    e = e.replaceAll("\\b(by|without|on|ignoring|group_left|group_right)\\s*\\([^)]*\\)", " ");
    Set<String> names = new TreeSet<>();
    Matcher m = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*(\\s*\\()?").matcher(e);
    while (m.find()) {
      if (m.group(1) != null) continue; // a function
      String id = m.group().trim();
      if (KEYWORDS.contains(id.toLowerCase(Locale.ROOT))) continue;
      names.add(id);
    }
    return names;
  }

  @Test
  void theParserFindsMetricNamesNotLabelsFunctionsOrKeywords() {
    assertThat(
            metricNames(
                "histogram_quantile(0.99, sum by (le, model) (rate(a_seconds_bucket{x=\"y z\"}"
                    + "[$__rate_interval]))) / on (model) group_left (z) b_total offset 5m"))
        .containsExactly("a_seconds_bucket", "b_total");
    assertThat(metricNames("sum(kvrouter_gateway_open_streams) > bool 0 and up"))
        .containsExactly("kvrouter_gateway_open_streams", "up");
  }

  @Test
  void everyMetricTheDashboardQueriesIsInMetrics() throws Exception {
    List<String> exprs = expressions(DASHBOARD);
    assertThat(exprs).hasSizeGreaterThan(20);
    Set<String> queried = new TreeSet<>();
    for (String e : exprs) queried.addAll(metricNames(e));
    assertThat(queried).hasSizeGreaterThan(20).allMatch(n -> n.startsWith("kvrouter_"));

    String metrics = trafficThenMetrics() + failuresThenMetrics();
    Set<String> samples = new TreeSet<>();
    for (String line : metrics.split("\n")) {
      if (line.isEmpty() || line.startsWith("#")) continue;
      Matcher m = Pattern.compile("^[a-zA-Z_:][a-zA-Z0-9_:]*").matcher(line);
      if (m.find()) samples.add(m.group());
    }
    Set<String> missing = new TreeSet<>(queried);
    missing.removeAll(samples);
    assertThat(missing).as("queried by the dashboard, not in /metrics").isEmpty();
  }

  /** A gateway with two mock engines, after chats (whole and streamed), /route and /query. */
  private String trafficThenMetrics() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", GatewayStubTest.tiny()).build());
    open.add(g);
    for (int i = 1; i <= 2; i++) {
      MockEngineServer e =
          MockEngineServer.start(
              GatewayMockEngineTest.tinyEngine()
                  .port(0)
                  .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                  .build());
      open.add(e);
      GatewayMockEngineTest.register(g, i, e);
    }
    for (int i = 0; i < 4; i++) {
      String chat = GatewayMockEngineTest.chat("Tell me about caches, " + i % 2 + ".");
      assertThat(post(g, "/v1/chat/completions", chat).statusCode()).isEqualTo(200);
      String stream = chat.replace("{\"model\"", "{\"stream\":true,\"model\"");
      assertThat(post(g, "/v1/chat/completions", stream).statusCode()).isEqualTo(200);
    }
    String tokens = "[1,2,3,4,5,6,7,8]";
    // a /route that no worker may take: a route rejection
    assertThat(
            post(
                    g,
                    "/route",
                    "{\"request_id\":\"x\",\"model_name\":\"tiny\",\"allowed_instances\":[],"
                        + "\"token_ids\":"
                        + tokens
                        + "}")
                .statusCode())
        .isEqualTo(503);
    assertThat(
            post(
                    g,
                    "/route",
                    "{\"request_id\":\"r\",\"model_name\":\"tiny\",\"token_ids\":" + tokens + "}")
                .statusCode())
        .isEqualTo(200);
    assertThat(
            post(g, "/query", "{\"model_name\":\"tiny\",\"token_ids\":" + tokens + "}")
                .statusCode())
        .isEqualTo(200);
    HttpResponse<String> m =
        GatewayMockEngineTest.HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/metrics")).GET().build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(m.statusCode()).isEqualTo(200);
    Files.writeString(Path.of("target", "grafana-metrics.txt"), m.body()); // to read on a failure
    return m.body();
  }

  /**
   * A gateway with admission (at most one request in flight per engine, a 1 ms queue time) in front
   * of two stub engines: engines that answer 500 (failed attempts, retries), count other prompt
   * tokens than the gateway (prompt mismatches), and are held busy while one more request queues
   * and times out.
   */
  private String failuresThenMetrics() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder()
                .port(0)
                .routing(RoutingSettings.DEFAULTS.withBusyRequests(1))
                .build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(
                    new AdmissionConfig(
                        8,
                        Duration.ofMillis(1),
                        0,
                        AdmissionConfig.TenantSource.HEADER,
                        Map.of(),
                        16,
                        8))
                .build());
    open.add(g);
    StubEngine a = new StubEngine();
    StubEngine b = new StubEngine();
    open.add(a);
    open.add(b);
    for (StubEngine s : List.of(a, b)) s.cachedTokens.set(4); // with prompt_tokens_details
    GatewayStubTest.register(g, 1, a.url());
    GatewayStubTest.register(g, 2, b.url());
    String chat = GatewayMockEngineTest.chat("Tell me about caches.");
    // one engine fails, the other answers: whichever the router tries first, a request that
    // lands on the failing one is retried on the other
    for (int i = 0; i < 20 && !text(g).contains("kvrouter_gateway_retries_total{"); i++) {
      a.status.set(i % 2 == 0 ? 500 : 200);
      b.status.set(i % 2 == 0 ? 200 : 500);
      assertThat(post(g, "/v1/chat/completions", chat).statusCode()).isEqualTo(200);
    }
    a.status.set(200);
    b.status.set(200);
    // both engines busy with a held request each: the next one queues, and times out
    CountDownLatch hold = new CountDownLatch(1);
    List<CompletableFuture<HttpResponse<String>>> held = new ArrayList<>();
    for (StubEngine s : List.of(a, b)) {
      s.arrived = new CountDownLatch(1);
      s.holdBeforeAnswer = hold;
    }
    for (int i = 0; i < 2; i++) {
      held.add(
          GatewayMockEngineTest.HTTP.sendAsync(
              HttpRequest.newBuilder(URI.create(g.url() + "/v1/chat/completions"))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(chat))
                  .build(),
              HttpResponse.BodyHandlers.ofString()));
    }
    assertThat(a.arrived.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(b.arrived.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(post(g, "/v1/chat/completions", chat).statusCode()).isEqualTo(429);
    hold.countDown();
    for (CompletableFuture<HttpResponse<String>> f : held) {
      assertThat(f.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    }
    return text(g);
  }

  private static String text(Gateway g) throws Exception {
    HttpResponse<String> m =
        GatewayMockEngineTest.HTTP.send(
            HttpRequest.newBuilder(URI.create(g.url() + "/metrics")).GET().build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(m.statusCode()).isEqualTo(200);
    return m.body();
  }

  private static HttpResponse<String> post(Gateway g, String path, String body) throws Exception {
    return GatewayMockEngineTest.post(g.url(), path, body);
  }
}
