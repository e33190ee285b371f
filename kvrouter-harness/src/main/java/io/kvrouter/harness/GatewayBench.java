package io.kvrouter.harness;

import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.Gateway;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * {@code kvrouter bench gateway}: what the gateway adds, side by side in one run: the same requests
 * sent (a) straight to instant mock engines (round-robin) and (b) through {@code kvrouter gateway}
 * to them; short completions and 8k-token multi-turn chats, streamed and not. For each: requests/s
 * at saturation (closed loop, {@code --clients} at once) and latency percentiles at a fixed rate
 * (open loop, {@code --rate} requests/s). Numbers: docs/BENCHMARKS.md, section Gateway; never a
 * test assertion.
 *
 * <pre>
 * Implementation notes
 *
 * Everything in this JVM: the engines (MockEngineServer with every timing at 0, so an answer is
 * ready at once), the gateway (Gateway.start, KV events over ZMQ as in production) and the load
 * (one shared java.net.http.HttpClient, virtual threads). Client, gateway and engines share the
 * machine's cores, so the direct run pays the client and the engines, the gateway run the same
 * plus the gateway: the difference is the gateway's cost on this machine, an upper bound of
 * what it adds on a machine of its own. Each phase is preceded by a warm-up of the same length.
 *
 * Data: the closed loop counts answered requests in one AtomicLong and stops its clients through
 * one AtomicBoolean; the open loop writes each request's latency into its own slot of a long[]
 * (one writer per slot) and a CountDownLatch orders those writes before the sort that reads them.
 * The gateway's stage times are its /metrics histograms (sum and count), read before and after
 * the fixed-rate phase. Output: one row per workload and path on out, flushed after each.
 * </pre>
 */
public final class GatewayBench {
  /** The flags of {@code kvrouter bench gateway}. */
  public record Settings(Path modelDir, int engines, int clients, int rate, double seconds) {}

  private final Settings s;

  public GatewayBench(Settings settings) {
    this.s = settings;
  }

  /** Runs the benchmark; returns the exit code (0, or 2 without the model directory). */
  public int run(PrintWriter out, PrintWriter err) throws Exception {
    Path modelDir = s.modelDir();
    int engines = s.engines();
    Logger.getLogger("io.helidon").setLevel(Level.WARNING);
    if (!Files.isDirectory(modelDir)) {
      err.println("bench gateway: no --model-dir " + modelDir);
      return 2;
    }
    List<MockEngineServer> es = new ArrayList<>();
    try (Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).build(),
            GatewayConfig.builder().model("tiny", modelDir).build())) {
      for (int i = 0; i < engines; i++) {
        MockEngineServer e =
            MockEngineServer.start(
                MockEngineServer.Config.builder()
                    .modelDir(modelDir)
                    .servedModelName("tiny")
                    .blockSize(16)
                    .numGpuBlocks(65536)
                    .maxNumSeqs(1024)
                    .prefillBaseMs(0)
                    .prefillMsPer1kTokens(0)
                    .decodeMsPerToken(0)
                    .enablePromptTokensDetails(true)
                    .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                    .build());
        es.add(e);
        g.register(
            new EngineSpec(
                e.url(), "tiny", 16, i + 1, 0, e.zmqEndpoint(), e.replayEndpoint(), null),
            16);
      }
      String[] direct = es.stream().map(MockEngineServer::url).toArray(String[]::new);
      String[] via = {g.url()};
      out.printf(
          Locale.ROOT,
          "bench gateway: %d instant mock engines, %d clients (saturation), %d req/s (latency),"
              + " %.0f s per phase, %d cores%n",
          engines,
          s.clients(),
          s.rate(),
          s.seconds(),
          Runtime.getRuntime().availableProcessors());
      out.printf(
          Locale.ROOT,
          "%-22s %-8s %10s %10s %10s %10s%n",
          "workload",
          "path",
          "req/s",
          "p50 ms",
          "p99 ms",
          "errors");
      for (Workload w : workloads()) {
        for (String[] target : new String[][] {direct, via}) {
          String label = target == direct ? "direct" : "gateway";
          double rps = saturate(target, w);
          paced(target, w); // warm-up
          double[] before = stages(g.url());
          double[] lat = paced(target, w);
          double[] after = stages(g.url());
          out.printf(
              Locale.ROOT,
              "%-22s %-8s %10.0f %10.3f %10.3f %10.0f%n",
              w.name,
              label,
              rps,
              lat[0],
              lat[1],
              lat[2]);
          if (target == via) {
            StringBuilder b = new StringBuilder("    gateway stages at the fixed rate, mean us:");
            for (int k = 0; k < STAGES.length; k++) {
              double n = after[2 * k + 1] - before[2 * k + 1];
              b.append(
                  String.format(
                      Locale.ROOT,
                      " %s %.1f",
                      STAGES[k],
                      (after[2 * k] - before[2 * k]) / n * 1e6));
            }
            out.println(b);
          }
          out.flush();
        }
      }
    } finally {
      for (MockEngineServer e : es) e.close();
    }
    return 0;
  }

  private static final String[] STAGES = {"parse", "tokenize", "route", "upstream"};

  /** {sum, count} of each stage's histogram, in STAGES order. */
  private double[] stages(String gateway) throws Exception {
    String metrics =
        http.send(
                HttpRequest.newBuilder(URI.create(gateway + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    double[] v = new double[STAGES.length * 2];
    for (int k = 0; k < STAGES.length; k++) {
      v[2 * k] = value(metrics, "kvrouter_gateway_stage_seconds_sum{stage=\"" + STAGES[k] + "\"}");
      v[2 * k + 1] =
          value(metrics, "kvrouter_gateway_stage_seconds_count{stage=\"" + STAGES[k] + "\"}");
    }
    return v;
  }

  private static double value(String metrics, String series) {
    for (String line : metrics.split("\n")) {
      if (line.startsWith(series + " "))
        return Double.parseDouble(line.substring(series.length() + 1));
    }
    return Double.NaN;
  }

  private record Workload(String name, String path, String[] bodies) {}

  private List<Workload> workloads() {
    List<Workload> w = new ArrayList<>();
    String[] shortBodies = new String[64];
    for (int i = 0; i < shortBodies.length; i++) {
      shortBodies[i] =
          "{\"model\":\"tiny\",\"prompt\":\"short prompt number " + i + "\",\"max_tokens\":4}";
    }
    w.add(new Workload("short completion", "/v1/completions", shortBodies));
    w.add(new Workload("short completion sse", "/v1/completions", stream(shortBodies)));
    String[] chats = new String[16];
    StringBuilder filler = new StringBuilder();
    while (filler.length() < 550) filler.append("the quick brown fox jumps over the lazy dog ");
    for (int c = 0; c < chats.length; c++) {
      StringBuilder b = new StringBuilder("{\"model\":\"tiny\",\"max_tokens\":4,\"messages\":[");
      b.append("{\"role\":\"system\",\"content\":\"conversation ").append(c).append("\"}");
      for (int t = 0; t < 16; t++) { // 16 x ~560 characters: about 8k tokens of the tiny model
        b.append(",{\"role\":\"")
            .append(t % 2 == 0 ? "user" : "assistant")
            .append("\",\"content\":\"");
        b.append("turn ").append(t).append(' ').append(filler).append("\"}");
      }
      chats[c] = b.append("]}").toString();
    }
    w.add(new Workload("8k-token chat", "/v1/chat/completions", chats));
    w.add(new Workload("8k-token chat sse", "/v1/chat/completions", stream(chats)));
    return w;
  }

  private static String[] stream(String[] bodies) {
    String[] out = new String[bodies.length];
    for (int i = 0; i < bodies.length; i++)
      out[i] = bodies[i].replace("{\"model\"", "{\"stream\":true,\"model\"");
    return out;
  }

  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .executor(Executors.newVirtualThreadPerTaskExecutor())
          .build();

  private boolean send(String base, Workload w, int i) {
    try {
      HttpResponse<byte[]> r =
          http.send(
              HttpRequest.newBuilder(URI.create(base + w.path))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(w.bodies[i % w.bodies.length]))
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      return r.statusCode() == 200;
    } catch (Exception e) {
      return false;
    }
  }

  /** Closed loop: requests/s with {@code --clients} at once (after a warm-up as long). */
  private double saturate(String[] targets, Workload w) throws InterruptedException {
    closedLoop(targets, w, s.seconds()); // warm-up
    return closedLoop(targets, w, s.seconds());
  }

  private double closedLoop(String[] targets, Workload w, double secs) throws InterruptedException {
    int clients = s.clients();
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    CountDownLatch end = new CountDownLatch(clients);
    long t0 = System.nanoTime();
    for (int c = 0; c < clients; c++) {
      int id = c;
      Thread.ofVirtual()
          .start(
              () -> {
                int i = id;
                while (!stop.get()) {
                  if (send(targets[i % targets.length], w, i)) done.incrementAndGet();
                  i += clients;
                }
                end.countDown();
              });
    }
    Thread.sleep((long) (secs * 1000));
    stop.set(true);
    end.await();
    return done.get() / ((System.nanoTime() - t0) / 1e9);
  }

  /** Open loop at {@code --rate}: {p50 ms, p99 ms, errors}. */
  private double[] paced(String[] targets, Workload w) throws InterruptedException {
    int rate = s.rate();
    int n = (int) (rate * s.seconds());
    long[] lat = new long[n];
    AtomicLong errors = new AtomicLong();
    CountDownLatch end = new CountDownLatch(n);
    long interval = 1_000_000_000L / rate;
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long due = t0 + i * interval;
      long wait = due - System.nanoTime();
      if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
      int k = i;
      Thread.ofVirtual()
          .start(
              () -> {
                long s = System.nanoTime();
                if (!send(targets[k % targets.length], w, k)) errors.incrementAndGet();
                lat[k] = System.nanoTime() - s;
                end.countDown();
              });
    }
    end.await();
    Arrays.sort(lat);
    return new double[] {lat[n / 2] / 1e6, lat[(int) (n * 0.99)] / 1e6, errors.get()};
  }
}
