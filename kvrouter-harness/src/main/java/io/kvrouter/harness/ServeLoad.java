package io.kvrouter.harness;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The load measurement of {@code kvrouter serve} (docs/BENCHMARKS.md, "HTTP service (serve)"):
 * fills a running server's index with 16 workers' blocks through {@code POST /events}, then for a
 * fixed time streams store/remove events at a target rate while {@code wrk} sends {@code /query}
 * requests with 1,024-token prompts, and prints what both achieved. Run it with {@code
 * kvrouter-harness/bench/serve-load.sh}, which starts and stops the server and runs the hidden
 * {@code kvrouter bench serve-load} (kvrouter-cli's flags for this class's Settings).
 *
 * <pre>
 * Implementation notes
 *
 * Data: a pool of prompts of promptTokens tokens, each made of one of 32 shared 256-token system
 * prompts and a unique rest, hashed once (local and sequence hashes, block size 16). Each worker
 * caches promptsPerWorker distinct pool prompts (a Stored event from the root each; the shared
 * prefixes are stored again, which the index treats as idempotent), so the (worker, block) pairs
 * held come to about workers × (32 × 16 + promptsPerWorker × 48).
 *
 * Streaming: pairs of batches, built before the clock starts: batch A stores, for each event, two
 * new blocks under the last block of a prompt the worker caches; batch B removes exactly those
 * blocks again. Posting A then B leaves the index as it was, so the pairs can be replayed in a
 * loop for any duration; each sender thread owns whole pairs, so B never overtakes its A. The
 * senders pace themselves to the target rate and report what they achieved.
 *
 * Queries: wrk runs with query.lua, which picks a random line of the bodies file for each request:
 * half are pool prompts (cached whole on some workers), half new prompts that share only a system
 * prompt with the cache.
 *
 * Output: the report on the out given to run(), a failed /events post on err (both PrintWriters,
 * which lock, so the sender threads may write to err). run() sets out and err before it starts a
 * thread and is not reentrant; the settings are copied into final fields at construction.
 * </pre>
 */
public final class ServeLoad {
  private static final int BLOCK = 16;
  private static final int SYSTEM_PROMPTS = 32;
  private static final int SYSTEM_TOKENS = 256;
  private static final String MODEL = "bench";

  /** The flags of {@code kvrouter bench serve-load}; serverPid -1: none. */
  public record Settings(
      String url,
      int workers,
      int promptsPerWorker,
      int promptTokens,
      int pool,
      int eventRate,
      int batch,
      int senders,
      int duration,
      int warmup,
      int wrkThreads,
      int wrkConnections,
      Path lua,
      long seed,
      long serverPid) {}

  private final Settings s;
  private final String url;
  private final int workers;
  private final int promptsPerWorker;
  private final int promptTokens;
  private final int pool;
  private final int eventRate;
  private final int batch;
  private final int senders;
  private final long serverPid;
  private PrintWriter out;
  private PrintWriter err;

  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  public ServeLoad(Settings settings) {
    this.s = settings;
    this.url = settings.url();
    this.workers = settings.workers();
    this.promptsPerWorker = settings.promptsPerWorker();
    this.promptTokens = settings.promptTokens();
    this.pool = settings.pool();
    this.eventRate = settings.eventRate();
    this.batch = settings.batch();
    this.senders = settings.senders();
    this.serverPid = settings.serverPid();
  }

  private record Prompt(int[] tokens, long[] local, long[] seq) {}

  /** Runs the measurement, its report on out and failed posts on err; returns the exit code 0. */
  public int run(PrintWriter out, PrintWriter err) throws Exception {
    this.out = out;
    this.err = err;
    SplittableRandom rnd = new SplittableRandom(s.seed());
    BlockHasher hasher = BlockHasher.of(BLOCK);
    int[][] system = new int[SYSTEM_PROMPTS][SYSTEM_TOKENS];
    for (int[] s : system) {
      for (int i = 0; i < s.length; i++) s[i] = rnd.nextInt(100_000);
    }
    List<Prompt> prompts = new ArrayList<>(pool);
    for (int p = 0; p < pool; p++) prompts.add(prompt(system[p % SYSTEM_PROMPTS], rnd, hasher));

    for (int w = 1; w <= workers; w++) {
      post(
          "/register",
          "{\"instance_id\":"
              + w
              + ",\"model_name\":\""
              + MODEL
              + "\",\"block_size\":"
              + BLOCK
              + "}",
          201);
    }
    // which pool prompts each worker caches
    int[][] cached = new int[workers][];
    long t0 = System.nanoTime();
    List<RouterEvent> preload = new ArrayList<>();
    long eventId = 0;
    for (int w = 0; w < workers; w++) {
      cached[w] = sample(pool, promptsPerWorker, rnd);
      for (int p : cached[w]) {
        Prompt pr = prompts.get(p);
        preload.add(
            new RouterEvent(
                Worker.of(w + 1), eventId++, CacheEvent.storedAtRoot(pr.seq(), pr.local())));
        if (preload.size() == 1000) {
          postEvents(RouterEventJson.writeEvents(preload).getBytes(StandardCharsets.UTF_8));
          preload.clear();
        }
      }
    }
    if (!preload.isEmpty()) {
      postEvents(RouterEventJson.writeEvents(preload).getBytes(StandardCharsets.UTF_8));
    }
    double preloadSeconds = (System.nanoTime() - t0) / 1e9;
    long blocks = (long) metric("kvrouter_blocks_indexed{");
    out.printf(
        Locale.ROOT,
        "preload: %d workers, %d stored events, %,d (worker, block) pairs indexed, %.1f s%n",
        workers,
        (long) workers * promptsPerWorker,
        blocks,
        preloadSeconds);

    // the query bodies: half cached pool prompts, half new prompts behind a cached system prompt
    Path bodies = Files.createTempFile("kvrouter-query-bodies", ".jsonl");
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 256; i++) {
      int[] tokens =
          i % 2 == 0
              ? prompts.get(rnd.nextInt(pool)).tokens()
              : prompt(system[rnd.nextInt(SYSTEM_PROMPTS)], rnd, hasher).tokens();
      sb.append("{\"model_name\":\"").append(MODEL).append("\",\"token_ids\":[");
      for (int k = 0; k < tokens.length; k++) {
        if (k > 0) sb.append(',');
        sb.append(Integer.toUnsignedString(tokens[k]));
      }
      sb.append("]}\n");
    }
    Files.writeString(bodies, sb);

    // event batches: pairs of (store two new blocks under a cached prompt's end, remove them)
    int pairs = 64;
    byte[][] storeBatches = new byte[pairs][];
    byte[][] removeBatches = new byte[pairs][];
    for (int k = 0; k < pairs; k++) {
      List<RouterEvent> stores = new ArrayList<>(batch);
      List<RouterEvent> removes = new ArrayList<>(batch);
      for (int i = 0; i < batch; i++) {
        int w = rnd.nextInt(workers);
        Prompt pr = prompts.get(cached[w][rnd.nextInt(cached[w].length)]);
        long parent = pr.seq()[pr.seq().length - 1];
        long l1 = rnd.nextLong();
        long l2 = rnd.nextLong();
        long s1 = SequenceHasher.next(parent, l1);
        long s2 = SequenceHasher.next(s1, l2);
        Worker wk = Worker.of(w + 1);
        stores.add(
            new RouterEvent(
                wk,
                eventId++,
                CacheEvent.stored(parent, new long[] {s1, s2}, new long[] {l1, l2})));
        removes.add(new RouterEvent(wk, eventId++, CacheEvent.removed(s2, s1)));
      }
      storeBatches[k] = RouterEventJson.writeEvents(stores).getBytes(StandardCharsets.UTF_8);
      removeBatches[k] = RouterEventJson.writeEvents(removes).getBytes(StandardCharsets.UTF_8);
    }
    out.printf(
        Locale.ROOT,
        "event batches: %d events of 2 blocks each, %,d bytes per store batch%n",
        batch,
        storeBatches[0].length);

    if (s.warmup() > 0) {
      out.println("warm-up: " + s.warmup() + " s");
      out.flush();
      phase(s.warmup(), bodies, storeBatches, removeBatches, false);
    }
    out.println("measuring: " + s.duration() + " s");
    out.flush();
    phase(s.duration(), bodies, storeBatches, removeBatches, true);
    Files.deleteIfExists(bodies);
    out.flush();
    return 0;
  }

  /** Runs wrk and the event senders side by side for {@code seconds}; prints results if asked. */
  private void phase(int seconds, Path bodies, byte[][] stores, byte[][] removes, boolean report)
      throws Exception {
    double received0 = metric("kvrouter_events_received_total{");
    double fmCount0 = metric("kvrouter_find_matches_duration_seconds_count{");
    double fmSum0 = metric("kvrouter_find_matches_duration_seconds_sum{");
    long blocks0 = (long) metric("kvrouter_blocks_indexed{");
    double gcCount0 = metric("jvm_gc_collection_seconds_count{");
    double gcSum0 = metric("jvm_gc_collection_seconds_sum{");
    String load0 = loadAverage();
    double cpu0 = serverCpuSeconds();
    AtomicLong sent = new AtomicLong();
    AtomicLong failed = new AtomicLong();
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    List<Thread> threads = new ArrayList<>();
    if (eventRate > 0) {
      double perSenderPairsPerSecond = eventRate / 2.0 / batch / senders;
      for (int t = 0; t < senders; t++) {
        final int id = t;
        Thread th =
            new Thread(
                () -> {
                  long start = System.nanoTime();
                  long n = 0;
                  int k = id;
                  while (System.nanoTime() < deadline) {
                    long due = start + (long) (n / perSenderPairsPerSecond * 1e9);
                    long wait = due - System.nanoTime();
                    if (wait > 0) sleepNanos(Math.min(wait, deadline - System.nanoTime()));
                    if (System.nanoTime() >= deadline) break;
                    int pair = k % stores.length;
                    if (postEvents(stores[pair]) && postEvents(removes[pair])) {
                      sent.addAndGet(2L * batch);
                    } else {
                      failed.incrementAndGet();
                    }
                    n++;
                    k += senders;
                  }
                },
                "events-" + t);
        th.start();
        threads.add(th);
      }
    }
    long wall0 = System.nanoTime();
    StringBuilder wrkOut = new StringBuilder();
    int wrkExit = 0;
    if (s.wrkConnections() > 0) {
      Process wrk =
          new ProcessBuilder(
                  "wrk",
                  "-t" + s.wrkThreads(),
                  "-c" + s.wrkConnections(),
                  "-d" + seconds + "s",
                  "--latency",
                  "-s",
                  s.lua().toString(),
                  url,
                  "--",
                  bodies.toString())
              .redirectErrorStream(true)
              .start();
      try (BufferedReader r =
          new BufferedReader(new InputStreamReader(wrk.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = r.readLine()) != null; ) wrkOut.append(line).append('\n');
      }
      wrkExit = wrk.waitFor();
    }
    for (Thread th : threads) th.join();
    double wall = (System.nanoTime() - wall0) / 1e9;
    if (!report) return;
    double received = metric("kvrouter_events_received_total{") - received0;
    double fmCount = metric("kvrouter_find_matches_duration_seconds_count{") - fmCount0;
    double fmSum = metric("kvrouter_find_matches_duration_seconds_sum{") - fmSum0;
    long blocks1 = (long) metric("kvrouter_blocks_indexed{");
    double cpu = serverCpuSeconds() - cpu0;
    double gcCount = metric("jvm_gc_collection_seconds_count{") - gcCount0;
    double gcSum = metric("jvm_gc_collection_seconds_sum{") - gcSum0;
    out.print(wrkOut);
    if (wrkExit != 0) out.println("wrk exited with " + wrkExit);
    out.printf(
        Locale.ROOT,
        "events: %,d posted and acknowledged in %.1f s = %,.0f events/s (%,.0f blocks/s);"
            + " server counted %,.0f; failed batches %d%n",
        sent.get(),
        wall,
        sent.get() / wall,
        2 * sent.get() / wall,
        received,
        failed.get());
    out.printf(
        Locale.ROOT,
        "index: %,d (worker, block) pairs before, %,d after; findMatches mean %.2f us over %,.0f"
            + " queries%n",
        blocks0,
        blocks1,
        fmCount == 0 ? 0 : fmSum / fmCount * 1e6,
        fmCount);
    out.printf(
        Locale.ROOT,
        "server GC: %.0f collections, %.0f ms in total; load average before %s, after %s%n",
        gcCount,
        gcSum * 1000,
        load0,
        loadAverage());
    Matcher m = Pattern.compile("Requests/sec:\\s+([0-9.]+)").matcher(wrkOut);
    if (m.find()) {
      out.printf(Locale.ROOT, "queries: %s /s%n", m.group(1));
    }
    if (serverPid > 0) {
      out.printf(Locale.ROOT, "server CPU: %.1f s in %.1f s = %.2f cores%n", cpu, wall, cpu / wall);
    }
  }

  /** User + system CPU seconds of the server process (Linux /proc), or 0. */
  private double serverCpuSeconds() {
    if (serverPid <= 0) return 0;
    try {
      String stat = Files.readString(Path.of("/proc/" + serverPid + "/stat"));
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0; // utime, stime in ticks
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  private static String loadAverage() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split(" ");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "(unknown)";
    }
  }

  private static void sleepNanos(long nanos) {
    try {
      Thread.sleep(Duration.ofNanos(Math.max(0, nanos)));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private Prompt prompt(int[] system, SplittableRandom rnd, BlockHasher hasher) {
    int[] t = new int[promptTokens];
    System.arraycopy(system, 0, t, 0, Math.min(system.length, t.length));
    for (int i = system.length; i < t.length; i++) t[i] = rnd.nextInt(100_000);
    long[] local = hasher.localHashes(t);
    return new Prompt(t, local, SequenceHasher.sequenceHashes(local));
  }

  private static int[] sample(int n, int k, SplittableRandom rnd) {
    int[] all = new int[n];
    for (int i = 0; i < n; i++) all[i] = i;
    for (int i = 0; i < k; i++) {
      int j = i + rnd.nextInt(n - i);
      int tmp = all[i];
      all[i] = all[j];
      all[j] = tmp;
    }
    return Arrays.copyOf(all, k);
  }

  private boolean postEvents(byte[] body) {
    try {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(URI.create(url + "/events?model_name=" + MODEL))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) {
        err.println("/events answered " + r.statusCode() + ": " + r.body());
        return false;
      }
      return true;
    } catch (IOException e) {
      err.println("/events failed: " + e);
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  private void post(String path, String json, int expect) throws IOException, InterruptedException {
    HttpResponse<String> r =
        client.send(
            HttpRequest.newBuilder(URI.create(url + path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != expect) {
      throw new IllegalStateException(path + " answered " + r.statusCode() + ": " + r.body());
    }
  }

  /** The sum of the samples of a metric whose line starts with {@code prefix}. */
  private double metric(String prefix) throws IOException, InterruptedException {
    String text =
        client
            .send(
                HttpRequest.newBuilder(URI.create(url + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    double sum = 0;
    for (String line : text.split("\n")) {
      if (line.startsWith(prefix))
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
    }
    return sum;
  }
}
