package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.transport.nats.NatsServer;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code simulate --events nats://...} against a real {@code nats-server -js}: the results equal an
 * in-process run's (the index is fed through the stream as freshly), a second run on the same
 * subjects starts from an empty index again, and a {@code kvrouter serve --events} replica that
 * registered the simulated workers holds exactly the blocks the simulation's index ended with.
 */
class SimulateNatsTest {
  private static final Pattern BLOCKS = Pattern.compile("\"blocks\" : (\\d+)");
  private static final Pattern PUBLISHED = Pattern.compile("\"events_published\" : (\\d+)");

  private static final String[] BASE = {
    "simulate",
    "--requests",
    "80",
    "--workers",
    "2",
    "--gpu-blocks",
    "1024",
    "--policies",
    "kv,approx",
    "--json",
    "--quiet",
    "--no-report"
  };

  private record Run(int code, String out, String err) {}

  private static Run simulate(String... extra) {
    List<String> args = new ArrayList<>(List.of(BASE));
    args.addAll(List.of(extra));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        Main.run(
            new PrintWriter(out, true), new PrintWriter(err, true), args.toArray(String[]::new));
    return new Run(code, out.toString(), err.toString());
  }

  /** The JSON results without the wall-clock times. */
  private static String results(Run r) {
    assertThat(r.code()).as(r.err()).isZero();
    return r.out().replaceAll("\"wall_s\" : [0-9.E-]+", "\"wall_s\" : _");
  }

  private static String get(String url) throws IOException, InterruptedException {
    return HttpClient.newHttpClient()
        .send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString())
        .body();
  }

  private static String post(String url, String body) throws IOException, InterruptedException {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create(url))
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  @Test
  void throughNatsTheResultsEqualInProcessAndAFollowingServerHoldsTheSameBlocks() throws Exception {
    String inProcess = results(simulate());
    Matcher m = BLOCKS.matcher(inProcess);
    assertThat(m.find()).isTrue();
    long kvBlocks = Long.parseLong(m.group(1)); // the kv policy comes first
    assertThat(kvBlocks).isPositive();
    Matcher p = PUBLISHED.matcher(inProcess);
    assertThat(p.find()).isTrue();
    long kvEvents = Long.parseLong(p.group(1));

    try (NatsServer nats = NatsServer.start();
        KvRouterServer follower =
            KvRouterServer.start(
                KvRouterServer.Config.builder()
                    .port(0)
                    .events(nats.url())
                    .replicaId("follower")
                    .build())) {
      for (int w = 0; w < 2; w++) {
        assertThat(
                post(
                    follower.url() + "/register",
                    "{\"instance_id\":" + w + ",\"model_name\":\"simulate-kv\",\"block_size\":64}"))
            .contains("\"ingestion\":\"nats\"");
      }
      for (int run = 0; run < 2; run++) { // the second run starts from a cleared index again
        assertThat(results(simulate("--events", nats.url()))).as("run " + run).isEqualTo(inProcess);
        String gauge =
            "kvrouter_blocks_indexed{model_name=\"simulate-kv\",routing_group=\"default\"} "
                + kvBlocks
                + ".0";
        // each run: a Cleared per rank (2), then the engines' events
        String applied =
            "kvrouter_nats_events_applied_total{model_name=\"simulate-kv\",routing_group=\"default\"} "
                + (run + 1) * (kvEvents + 2)
                + ".0";
        long deadline = System.nanoTime() + 15_000_000_000L;
        String metrics = get(follower.url() + "/metrics");
        while (!metrics.contains(applied) && System.nanoTime() < deadline) {
          Thread.sleep(50);
          metrics = get(follower.url() + "/metrics");
        }
        assertThat(metrics).as("run " + run).contains(applied, gauge);
      }
    }
  }

  @Test
  void withAHostTierTheResultsEqualInProcessToo() {
    // evicted device blocks go to the host tier, whose events travel with their storage_tier
    List<String> args =
        new ArrayList<>(
            List.of(
                "simulate",
                "--requests",
                "80",
                "--workers",
                "2",
                "--gpu-blocks",
                "48",
                "--host-blocks",
                "4096",
                "--policies",
                "kv,kv-device",
                "--json",
                "--quiet",
                "--no-report"));
    String inProcess = results(run(args));
    try (NatsServer nats = NatsServer.start()) {
      args.add("--events");
      args.add(nats.url());
      assertThat(results(run(args))).isEqualTo(inProcess);
    }
  }

  private static Run run(List<String> args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        Main.run(
            new PrintWriter(out, true), new PrintWriter(err, true), args.toArray(String[]::new));
    return new Run(code, out.toString(), err.toString());
  }

  @Test
  void anUnreachableNatsExitsWithOneAndABadUrlWithTwo() throws IOException {
    int nobody;
    try (ServerSocket s = new ServerSocket(0)) {
      nobody = s.getLocalPort();
    }
    Run r = simulate("--events", "nats://127.0.0.1:" + nobody);
    assertThat(r.code()).isEqualTo(1);
    assertThat(r.err())
        .contains(
            "kvrouter simulate: --events: cannot connect to NATS at nats://127.0.0.1:" + nobody);
    Run bad = simulate("--events", "127.0.0.1:4222");
    assertThat(bad.code()).isEqualTo(2);
    assertThat(bad.err()).contains("--events: '127.0.0.1:4222' is not a NATS server URL");
  }
}
