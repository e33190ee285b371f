package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.MockEngines;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ConnectException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real {@code kvrouter gateway} as a child process: its {@code /ready} (the README's {@code
 * until curl -sf .../ready} loop ends only once an engine is registered and answers), a static
 * engine that refuses connections reported at start, and its stop: on SIGTERM {@code /ready}
 * answers 503 at once while a stream in flight finishes, then the process exits 0, the code {@code
 * gateway --help} documents; SIGINT exits 0 too, a second SIGTERM 143. And the gateway run with
 * deploy/base's config file, discovering a pod from fabric8's mock API server.
 */
class GatewayProcessTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static final String LISTENING = "listening on (http://\\S+) ";
  private static final Duration DEADLINE = Duration.ofSeconds(120);
  private static final String STREAM =
      "{\"model\":\"tiny\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

  @TempDir Path dir;

  private static String tiny() {
    return "tiny=" + MockEngines.tinyModel();
  }

  private static int closedPort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private static HttpResponse<String> get(String url) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> post(String url, String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(url))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** A stream through the gateway, its first line read (the engine's first chunk). */
  private static BufferedReader openStream(String url) throws Exception {
    HttpResponse<InputStream> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(url + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(STREAM))
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(r.statusCode()).isEqualTo(200);
    BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8));
    assertThat(in.readLine()).contains("held");
    return in;
  }

  /** Polls {@code GET url} until {@code status} (each poll a real answer or a refusal). */
  private static HttpResponse<String> awaitStatus(String url, int status) throws Exception {
    long end = System.nanoTime() + DEADLINE.toNanos();
    while (true) {
      HttpResponse<String> r = get(url);
      if (r.statusCode() == status) return r;
      if (System.nanoTime() - end > 0) {
        throw new AssertionError("no " + status + " from " + url + "; last: " + r.body());
      }
      LockSupport.parkNanos(Duration.ofMillis(20).toNanos());
    }
  }

  /** The exit codes {@code gateway --help} documents: code to what it says. */
  static Map<Integer, String> documentedExitCodes() {
    StringWriter out = new StringWriter();
    assertThat(
            Main.run(
                new PrintWriter(out, true),
                new PrintWriter(new StringWriter(), true),
                "gateway",
                "--help"))
        .isZero();
    String help = out.toString();
    String codes = help.substring(help.indexOf("Exit codes:"));
    Map<Integer, String> m = new TreeMap<>();
    Matcher x = Pattern.compile("(?m)^\\s+(\\d+)\\s+(.*(?:\\n\\s{6,}\\S.*)*)").matcher(codes);
    while (x.find()) m.put(Integer.parseInt(x.group(1)), x.group(2).replaceAll("\\s+", " "));
    return m;
  }

  @Test
  void readyWaitsForAHealthyEngineAndSigtermLetsTheStreamFinishThenExits0() throws Exception {
    String dead = "http://127.0.0.1:" + closedPort();
    try (HeldEngine engine = new HeldEngine("127.0.0.1");
        ChildProcess gw =
            new ChildProcess(
                List.of(),
                "gateway",
                "--port",
                "0",
                "--model",
                tiny(),
                "--engine",
                dead,
                "--health-interval-ms",
                "200",
                "--shutdown-grace-seconds",
                "60")) {
      String url = gw.await(LISTENING);
      // the static engine that refuses connections: registered, reported, out of routing
      gw.await("engine " + Pattern.quote(dead) + " registered, but it does not answer GET /health");
      gw.await(
          "WARNING .*engine "
              + Pattern.quote(dead)
              + " \\(model tiny\\) is registered but does not answer: GET /health failed");
      HttpResponse<String> ready = get(url + "/ready");
      assertThat(ready.statusCode()).isEqualTo(503);
      assertThat(ready.body())
          .contains("model 'tiny' has no engine ready to serve")
          .contains("1 failing its health checks");
      assertThat(get(url + "/health").statusCode()).isEqualTo(200);

      // the README's loop: ready once an engine is registered and answers
      HttpResponse<String> reg =
          post(
              url + "/register",
              "{\"instance_id\": 9, \"model_name\": \"tiny\", \"block_size\": 16, \"base_url\": \""
                  + engine.url()
                  + "\"}");
      assertThat(reg.statusCode()).as(reg.body()).isEqualTo(201);
      awaitStatus(url + "/ready", 200);

      BufferedReader stream = openStream(url);
      gw.sigterm();
      // the listener stays open while the stream runs: a 503 with the reason, not a refusal
      HttpResponse<String> stopping = awaitStatus(url + "/ready", 503);
      assertThat(stopping.body()).contains("shutting down: 1 request(s) in flight finishing");
      assertThat(get(url + "/health").statusCode()).isEqualTo(200);
      HttpResponse<String> refused = post(url + "/v1/chat/completions", STREAM);
      assertThat(refused.statusCode()).isEqualTo(503);
      gw.await("kvrouter gateway: SIGTERM: stopping");

      engine.release();
      StringBuilder rest = new StringBuilder();
      for (String l; (l = stream.readLine()) != null; ) rest.append(l).append('\n');
      assertThat(rest.toString()).contains("then released").endsWith("data: [DONE]\n\n");
      int code = gw.exitCode();
      assertThat(code).as(gw.output()).isZero();
      assertThat(gw.output()).contains("kvrouter gateway: stopped");
      assertThat(documentedExitCodes().get(code)).contains("stopped by SIGTERM or Ctrl-C");
      try {
        get(url + "/health");
        throw new AssertionError("still listening after exit");
      } catch (ConnectException expected) {
        // gone
      }
    }
  }

  @Test
  void ctrlCExits0AndASecondSigtermWhileStoppingExits143() throws Exception {
    try (ChildProcess gw =
        new ChildProcess(List.of(), "gateway", "--port", "0", "--model", tiny())) {
      gw.await(LISTENING);
      gw.sigint();
      gw.await("kvrouter gateway: SIGINT: stopping");
      int code = gw.exitCode();
      assertThat(code).as(gw.output()).isZero();
      assertThat(documentedExitCodes().get(code)).contains("Ctrl-C (SIGINT)");
    }
    try (HeldEngine engine = new HeldEngine("127.0.0.1");
        ChildProcess gw =
            new ChildProcess(
                List.of(),
                "gateway",
                "--port",
                "0",
                "--model",
                tiny(),
                "--engine",
                engine.url(),
                "--shutdown-grace-seconds",
                "60")) {
      String url = gw.await(LISTENING);
      awaitStatus(url + "/ready", 200);
      openStream(url);
      gw.sigterm();
      gw.await("kvrouter gateway: SIGTERM: stopping");
      gw.sigterm(); // the stream is still held: the first stop is still waiting for it
      int code = gw.exitCode();
      assertThat(code).as(gw.output()).isEqualTo(143);
      assertThat(documentedExitCodes().get(code)).contains("a second SIGTERM while stopping");
    }
  }

  @Test
  void theDeployConfigFileDiscoversThePodsOfItsSelector() throws Exception {
    // deploy/base's gateway.properties, as the ConfigMap mounts it
    ConfigMap cm;
    try (InputStream in = Files.newInputStream(Path.of("../deploy/base/configmap.yaml"))) {
      cm = Serialization.unmarshal(in, ConfigMap.class);
    }
    Path config = dir.resolve("gateway.properties");
    Files.writeString(config, cm.getData().get("gateway.properties"));
    try (KubeApi api = new KubeApi();
        MockEngineServer engine =
            MockEngineServer.start(
                MockEngineServer.Config.builder()
                    .host("127.0.0.6")
                    .port(0)
                    .modelDir(MockEngines.tinyModel())
                    .servedModelName("qwen3")
                    .blockSize(16)
                    .speedup(20)
                    .defaultMaxTokens(4)
                    .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.6:*", "tcp://127.0.0.6:*"))
                    .build())) {
      String pub = engine.zmqEndpoint();
      String replay = engine.replayEndpoint();
      // the example vLLM Deployment's pods: label app=vllm-qwen3, model qwen3, block size 16
      api.create(
          KubeApi.pod(
              "vllm-qwen3-0",
              Map.of("app", "vllm-qwen3"),
              Map.of("kvrouter.io/model", "qwen3", "kvrouter.io/block-size", "16"),
              "127.0.0.6",
              true,
              engine.port(),
              Integer.parseInt(pub.substring(pub.lastIndexOf(':') + 1)),
              Integer.parseInt(replay.substring(replay.lastIndexOf(':') + 1))));
      try (ChildProcess gw =
          new ChildProcess(
              api.childProperties(),
              "gateway",
              "--config",
              config.toString(),
              // as deployment.yaml's args; the address and port of this test instead of the file's
              "--discovery-namespace",
              KubeApi.NS,
              "--host",
              "127.0.0.1",
              "--port",
              "0")) {
        String url = gw.await(LISTENING);
        gw.await(
            "discovering engines: the Ready pods of namespace llm selected by 'app=vllm-qwen3'");
        awaitStatus(url + "/ready", 200);
        HttpResponse<String> d = get(url + "/discovery");
        assertThat(d.body())
            .contains("\"connected\":true")
            .contains("\"pod\":\"llm/vllm-qwen3-0\"")
            .contains("\"base_url\":\"" + engine.url() + "\"");
        HttpResponse<String> chat =
            post(
                url + "/v1/chat/completions",
                "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}");
        assertThat(chat.statusCode()).as(chat.body()).isEqualTo(200);
        assertThat(engine.recentRequests()).hasSize(1);
        gw.sigterm();
        assertThat(gw.exitCode()).as(gw.output()).isZero();
      }
    }
  }
}
