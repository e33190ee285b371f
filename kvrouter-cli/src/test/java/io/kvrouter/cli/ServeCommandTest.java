package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.server.KvRouterServer;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvrouter serve} as a process: prints its configuration (token masked) and how to register
 * a worker, serves, and stops gracefully on SIGTERM; config-file and flag errors exit with 2.
 */
class ServeCommandTest {
  private static final Pattern LISTENING = Pattern.compile("listening on (http://\\S+)");

  @TempDir Path dir;

  @Test
  void servesAndStopsGracefullyOnSigterm() throws Exception {
    Path cfg = dir.resolve("serve.properties");
    Files.writeString(
        cfg,
        "port = 0\nauth-token = topsecret\nmax-body-size = 1MiB\naccept-unregistered = false\n"
            + "read-timeout-ms = 4500\nnats-apply-wait-ms = 2500\nmax-registrations = 7\n"
            + "allowed-engine-hosts = 10.0.0.5,Engine-A\n");
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                Main.class.getName(),
                "serve",
                "--config",
                cfg.toString(),
                "--accept-unregistered")
            .redirectErrorStream(true)
            .start();
    List<String> lines = new ArrayList<>();
    try {
      BufferedReader r =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      String url = null;
      for (String line; url == null && (line = r.readLine()) != null; ) {
        lines.add(line);
        Matcher m = LISTENING.matcher(line);
        if (m.find()) url = m.group(1);
      }
      assertThat(url).as(String.join("\n", lines)).startsWith("http://127.0.0.1:");
      HttpClient client = HttpClient.newHttpClient();
      HttpResponse<String> health =
          client.send(
              HttpRequest.newBuilder(URI.create(url + "/health")).build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(health.statusCode()).isEqualTo(200);
      HttpResponse<String> unauthorised =
          client.send(
              HttpRequest.newBuilder(URI.create(url + "/register"))
                  .POST(HttpRequest.BodyPublishers.ofString("{}"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(unauthorised.statusCode()).isEqualTo(401);

      p.toHandle().destroy(); // SIGTERM (Process.destroy would also close our end of stdout)
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as("the exit code of a stop by SIGTERM").isZero();
      for (String line; (line = r.readLine()) != null; ) lines.add(line);
    } finally {
      p.destroyForcibly();
    }
    String out = String.join("\n", lines);
    assertThat(out)
        .contains("kvrouter serve: configuration")
        .containsPattern("auth-token +\\*{6} \\(set\\)")
        .containsPattern("max-body-size +1048576")
        .containsPattern("accept-unregistered +true")
        .containsPattern("read-timeout-ms +4500")
        .containsPattern("max-registrations +7")
        .containsPattern("allowed-engine-hosts +10\\.0\\.0\\.5,engine-a")
        .containsPattern("host +127\\.0\\.0\\.1")
        .contains("/register")
        .contains("kvrouter serve: SIGTERM: stopping")
        .contains("kvrouter serve: stopped")
        .doesNotContain("topsecret");
  }

  @Test
  void badConfigurationIsAUsageError() throws IOException {
    Path unknown = dir.resolve("bad.properties");
    Files.writeString(unknown, "prot=1\n");
    Path badValue = dir.resolve("bad-value.properties");
    Files.writeString(badValue, "port=eighty\n");
    PrintStream oldErr = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      assertThat(Main.run("serve", "--config", unknown.toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--config", badValue.toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--config", dir.resolve("missing").toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--port", "70000")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-body-size", "lots")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-blocks", "0")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-tier-blocks", "0")).isEqualTo(2);
      assertThat(Main.run("serve", "--read-timeout-ms", "0")).isEqualTo(2);
      assertThat(Main.run("serve", "--nats-apply-wait-ms", "0")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-registrations", "0")).isEqualTo(2);
    } finally {
      System.setErr(oldErr);
    }
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains("unknown key 'prot'")
        .contains("eighty")
        .contains("cannot read --config")
        .contains("port must be in 0..65535")
        .contains("not a size: 'lots'")
        .contains("kvrouter serve: --max-blocks must be >= 1, got 0")
        .contains("kvrouter serve: --max-tier-blocks must be >= 1, got 0")
        .contains("kvrouter serve: --read-timeout-ms must be >= 1, got 0")
        .contains("kvrouter serve: --nats-apply-wait-ms must be >= 1, got 0")
        .contains("kvrouter serve: --max-registrations must be >= 1, got 0");
  }

  @Test
  void anUnreachablePeerExitsWithOneAndSaysWhy() throws IOException {
    int nobody;
    try (ServerSocket s = new ServerSocket(0)) {
      nobody = s.getLocalPort();
    }
    PrintStream oldErr = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      assertThat(Main.run("serve", "--port", "0", "--peer", "http://127.0.0.1:" + nobody))
          .isEqualTo(1);
      assertThat(Main.run("serve", "--port", "0", "--peer", "127.0.0.1:" + nobody)).isEqualTo(2);
    } finally {
      System.setErr(oldErr);
    }
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains(
            "kvrouter serve: warm start: cannot reach the peer http://127.0.0.1:"
                + nobody
                + " (GET /dump): ConnectException; is a kvrouter serve listening there?")
        .contains("is not an http://host:port URL of a running kvrouter serve");
  }

  /** What a run of the CLI printed, on its writers and on System.err (where logging goes). */
  private record Run(int code, String out, String err, String systemErr) {}

  private static Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    PrintStream oldErr = System.err;
    ByteArrayOutputStream systemErr = new ByteArrayOutputStream();
    System.setErr(new PrintStream(systemErr, true, StandardCharsets.UTF_8));
    int code;
    try {
      code = Main.run(new PrintWriter(out, true), new PrintWriter(err, true), args);
    } finally {
      System.setErr(oldErr);
    }
    return new Run(
        code, out.toString(), err.toString(), systemErr.toString(StandardCharsets.UTF_8));
  }

  @Test
  void aPortInUseIsOneLineAndExitCodeOne() throws IOException {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress("127.0.0.1", 0));
      int port = taken.getLocalPort();
      Run r = run("serve", "--port", Integer.toString(port));
      assertThat(r.code()).as(r.toString()).isEqualTo(1);
      assertThat(r.err())
          .as(r.toString())
          .isEqualTo(
              "kvrouter serve: cannot listen on 127.0.0.1:"
                  + port
                  + ": Address already in use (another process listens there: stop it, or"
                  + " choose another --port)"
                  + System.lineSeparator());
      assertThat(r.out()).doesNotContain("listening on").doesNotContain("-1");
      assertThat(r.systemErr()).as("logged meanwhile").isEmpty();
      // an address that is not this machine's: the same, with the system's reason
      Run foreign = run("serve", "--host", "192.0.2.1", "--port", "0");
      assertThat(foreign.code()).as(foreign.toString()).isEqualTo(1);
      assertThat(foreign.err()).startsWith("kvrouter serve: cannot listen on 192.0.2.1:0: ");
      assertThat(foreign.err().strip()).doesNotContain("\n");
      assertThat(foreign.systemErr()).as("logged meanwhile").isEmpty();
    }
  }

  @Test
  void theEmbeddedServerThrowsAListenExceptionNamingTheAddress() throws IOException {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress("127.0.0.1", 0));
      int port = taken.getLocalPort();
      KvRouterServer.Config cfg = KvRouterServer.Config.builder().port(port).build();
      assertThatThrownBy(() -> KvRouterServer.start(cfg))
          .isInstanceOfSatisfying(
              KvRouterServer.ListenException.class,
              e -> {
                assertThat(e.host()).isEqualTo("127.0.0.1");
                assertThat(e.port()).isEqualTo(port);
                assertThat(e.inUse()).isTrue();
              })
          .isInstanceOf(KvRouterServer.StartException.class)
          .hasMessage("cannot listen on 127.0.0.1:" + port + ": Address already in use");
    }
    KvRouterServer.Config unknown =
        KvRouterServer.Config.builder().host("no-such-host.invalid").port(0).build();
    assertThatThrownBy(() -> KvRouterServer.start(unknown))
        .isInstanceOf(KvRouterServer.ListenException.class)
        .hasMessage("cannot listen on no-such-host.invalid:0: unknown host 'no-such-host.invalid'");
  }

  @Test
  void anUnreachableNatsServerIsOneLineAndNoLog() throws IOException {
    int nobody;
    try (ServerSocket s = new ServerSocket(0)) {
      nobody = s.getLocalPort();
    }
    Run r = run("serve", "--port", "0", "--events", "nats://127.0.0.1:" + nobody);
    assertThat(r.code()).as(r.toString()).isEqualTo(1);
    assertThat(r.err())
        .as(r.toString())
        .startsWith("kvrouter serve: events: cannot connect to NATS at nats://127.0.0.1:" + nobody)
        .endsWith("(is nats-server running there with JetStream, -js?)" + System.lineSeparator());
    assertThat(r.err().strip()).doesNotContain("\n");
    assertThat(r.systemErr()).as("logged meanwhile").isEmpty();
  }

  @Test
  void afterAWarmStartTheBannerSaysWhatWasLoaded() throws Exception {
    try (KvRouterServer peer =
        KvRouterServer.start(KvRouterServer.Config.builder().port(0).build())) {
      HttpClient client = HttpClient.newHttpClient();
      for (int id = 1; id <= 2; id++) {
        assertThat(
                post(
                        client,
                        peer.url() + "/register",
                        "{\"instance_id\": "
                            + id
                            + ", \"model_name\": \"demo\", \"block_size\": 4}")
                    .statusCode())
            .isEqualTo(201);
      }
      // worker 1 caches the blocks of tokens 1..8 (README's example event): two blocks
      HttpResponse<String> events =
          post(
              client,
              peer.url() + "/events?model_name=demo",
              "[{\"worker_id\": 1, \"event\": {\"event_id\": 1, \"dp_rank\": 0, \"data\":"
                  + " {\"stored\": {\"parent_hash\": null, \"blocks\": [{\"block_hash\":"
                  + " 14643705804678351452, \"tokens_hash\": 14643705804678351452},"
                  + " {\"block_hash\": 4945711292740353085, \"tokens_hash\":"
                  + " 16777012769546811212}]}}}}]");
      assertThat(events.statusCode()).as(events.body()).isEqualTo(200);
      List<String> lines = new ArrayList<>();
      Process p = serveProcess("serve", "--port", "0", "--peer", peer.url());
      try {
        BufferedReader r =
            new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        for (String line; (line = r.readLine()) != null; ) {
          lines.add(line);
          if (line.startsWith("Ctrl-C")) break;
        }
      } finally {
        p.destroyForcibly();
        p.waitFor(30, TimeUnit.SECONDS);
      }
      String out = String.join("\n", lines);
      assertThat(out)
          .contains(
              "kvrouter serve: warm start from "
                  + peer.url()
                  + " loaded 1 model (1 index), 2 worker ranks, 2 blocks")
          .containsPattern(
              "2 worker ranks registered by the warm start \\(curl http://\\S+/workers")
          .doesNotContain("No worker is registered yet");
    }
  }

  @Test
  void theHelpSaysAnyAddressMayBeBoundAndListsTheExitCodes() {
    Run r = run("serve", "--help");
    assertThat(r.code()).isZero();
    String help = r.out().replaceAll("\\s+", " ");
    assertThat(help)
        .doesNotContain("loopback only")
        .contains("default: 127.0.0.1, loopback: only this machine can connect")
        .contains("0.0.0.0")
        .contains("--auth-token too")
        .contains("Exit codes:")
        .contains("1 could not start: the address cannot be bound");
  }

  private static Process serveProcess(String... args) throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add(Main.class.getName());
    cmd.addAll(List.of(args));
    return new ProcessBuilder(cmd).redirectErrorStream(true).start();
  }

  private static HttpResponse<String> post(HttpClient client, String url, String json)
      throws IOException, InterruptedException {
    return client.send(
        HttpRequest.newBuilder(URI.create(url))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void sizesTakeBinaryUnits() {
    SizeConverter c = new SizeConverter();
    assertThat(c.convert("8MiB")).isEqualTo(8L << 20);
    assertThat(c.convert("512 KiB")).isEqualTo(512L << 10);
    assertThat(c.convert("1GiB")).isEqualTo(1L << 30);
    assertThat(c.convert("100")).isEqualTo(100L);
    assertThat(c.convert("100B")).isEqualTo(100L);
  }
}
