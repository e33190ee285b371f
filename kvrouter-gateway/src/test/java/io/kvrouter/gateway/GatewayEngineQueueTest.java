package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayEngineAnswersTest.WHOLE;
import static io.kvrouter.gateway.GatewayStubTest.completion;
import static io.kvrouter.gateway.GatewayStubTest.range;
import static io.kvrouter.gateway.GatewayStubTest.register;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Saturation from the engine's own metrics (--busy-engine-waiting, EngineQueueWatch): an engine
 * that says requests wait in its own queue is busy, a request waits in the admission queue while
 * every engine is so and is granted when a reading says the queue drained; an engine whose metrics
 * cannot be read is never taken for busy. The test runs the watch's rounds itself (the interval is
 * an hour), so every step follows a reading it made.
 */
class GatewayEngineQueueTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway(AdmissionConfig admission) throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .admission(admission)
                .busyEngineWaiting(2)
                .engineMetricsInterval(Duration.ofHours(1))
                .build());
    open.add(g);
    return g;
  }

  private RawEngine engine() throws Exception {
    RawEngine e =
        new RawEngine(
            (head, body, out) ->
                out.write(
                    ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                            + WHOLE.length()
                            + "\r\n\r\n"
                            + WHOLE)
                        .getBytes(StandardCharsets.UTF_8)));
    open.add(e);
    return e;
  }

  private static CompletableFuture<HttpResponse<String>> post(Gateway g) {
    return HTTP.sendAsync(
        HttpRequest.newBuilder(URI.create(g.url() + "/v1/completions"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(completion(range(8), false, "")))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aRequestWaitsWhileItsEngineSaysItsQueueIsFullAndGoesWhenItDrains() throws Exception {
    Gateway g = gateway(AdmissionConfig.DEFAULTS);
    RawEngine e = engine();
    e.metrics = "vllm:num_requests_waiting{engine=\"0\",model_name=\"tiny\"} 3.0\n";
    RouterModel m = register(g, 1, e.url());
    g.queueWatch.readAll();
    assertThat(g.engine(e.url()).engineWaiting()).isEqualTo(3);

    CompletableFuture<HttpResponse<String>> r = post(g);
    GatewayStubTest.await("the request queued", () -> g.admission.depth(m) == 1);
    assertThat(e.answeredConnections.get()).as("nothing reached the engine").isZero();

    e.metrics = "vllm:num_requests_waiting{engine=\"0\",model_name=\"tiny\"} 1.0\n";
    g.queueWatch.readAll(); // below the limit of 2: the queue is checked again
    HttpResponse<String> a = r.get(60, TimeUnit.SECONDS);
    assertThat(a.statusCode()).as(a.body()).isEqualTo(200);
    assertThat(a.body()).isEqualTo(WHOLE);
    assertThat(g.metrics.admission.grants.labelValues("tiny", "engine_queue").get()).isEqualTo(1);
    assertThat(g.admission.depth(m)).isZero();
  }

  @Test
  void withoutAQueueEveryEngineBusyByItsOwnQueueIsA503() throws Exception {
    Gateway g =
        gateway(
            new AdmissionConfig(
                0,
                Duration.ofSeconds(30),
                0,
                AdmissionConfig.TenantSource.HEADER,
                Map.of(),
                256,
                32));
    RawEngine e = engine();
    e.metrics = "sglang:num_queue_reqs 5\n";
    register(g, 1, e.url());
    g.queueWatch.readAll();
    HttpResponse<String> a = post(g).get(60, TimeUnit.SECONDS);
    assertThat(a.statusCode()).isEqualTo(503);
    assertThat(a.body()).contains("all_busy").contains("--busy-engine-waiting");
    assertThat(e.answeredConnections.get()).isZero();
  }

  @Test
  void anEngineWhoseMetricsCannotBeReadIsNotTakenForBusy() throws Exception {
    Gateway g = gateway(AdmissionConfig.DEFAULTS);
    RawEngine e = engine(); // no /metrics: 404
    register(g, 1, e.url());
    g.queueWatch.readAll();
    assertThat(g.engine(e.url()).engineWaiting()).isEqualTo(-1);
    assertThat(g.metrics.engineMetricsFailures.get()).isEqualTo(1);
    HttpResponse<String> a = post(g).get(60, TimeUnit.SECONDS);
    assertThat(a.statusCode()).as(a.body()).isEqualTo(200);
  }
}
