package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import io.kvrouter.transport.nats.NatsServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every tier travels between replicas (docs/service.md, {@code GET /dump}; docs/ingestion.md,
 * "Tiers on the stream"): a server warm-started from a peer's dump, and servers sharing a NATS
 * stream, answer {@code /query} with the peer's {@code tier_blocks} and {@code /route} with its
 * {@code weighted_blocks}, also for an index whose tiers hold no block any more; a dump read as an
 * older version reads it (its {@code events} alone) is the device index.
 */
class TierReplicationTest {
  private static final int BS = 4;
  private static final Duration WAIT = Duration.ofSeconds(15);
  private static final int[] PROMPT = range(1, 32); // 8 blocks
  private static final long[] LOCAL = BlockHasher.of(BS).localHashes(PROMPT);
  private static final long[] SEQ = SequenceHasher.sequenceHashes(LOCAL);

  private static TieredEvent ev(StorageTier tier, long worker, long id, CacheEvent data) {
    return new TieredEvent(tier, new RouterEvent(new Worker(worker, 0), id, data));
  }

  private static CacheEvent storedFrom(int from, int to) {
    long[] h = Arrays.copyOfRange(SEQ, from, to);
    long[] l = Arrays.copyOfRange(LOCAL, from, to);
    return from == 0 ? CacheEvent.storedAtRoot(h, l) : CacheEvent.stored(SEQ[from - 1], h, l);
  }

  /**
   * Model m: rank 1 holds 4 blocks on the device and 8 on the host, minus host block 6; rank 2
   * holds 8 on the device with a hole at block 1 that its host copy fills; rank 3 holds 5 on disk.
   * Model m2: rank 1 holds 4 blocks on the device and had one on the host, which it lost.
   */
  private static List<TieredEvent> history(String model) {
    List<TieredEvent> e = new ArrayList<>();
    if (model.equals("m")) {
      e.add(ev(StorageTier.DEVICE, 1, 1, storedFrom(0, 4)));
      e.add(ev(StorageTier.HOST, 1, 2, storedFrom(0, 8)));
      e.add(ev(StorageTier.HOST, 1, 3, CacheEvent.removed(SEQ[6])));
      e.add(ev(StorageTier.DEVICE, 2, 4, storedFrom(0, 8)));
      e.add(ev(StorageTier.DEVICE, 2, 5, CacheEvent.removed(SEQ[1])));
      e.add(ev(StorageTier.HOST, 2, 6, storedFrom(0, 2)));
      e.add(ev(StorageTier.DISK, 3, 7, storedFrom(0, 5)));
    } else {
      e.add(ev(StorageTier.DEVICE, 1, 1, storedFrom(0, 4)));
      e.add(ev(StorageTier.HOST, 1, 2, storedFrom(0, 1)));
      e.add(ev(StorageTier.HOST, 1, 3, CacheEvent.removed(SEQ[0])));
    }
    return e;
  }

  private static void populate(HttpFixture f, boolean register) {
    for (String model : new String[] {"m", "m2"}) {
      if (register) {
        for (int w = 1; w <= 3; w++)
          assertThat(f.register(w, 0, model, BS).status()).isEqualTo(201);
      }
      HttpFixture.Reply r =
          f.post("/events?model_name=" + model, RouterEventJson.writeTieredEvents(history(model)));
      assertThat(r.status()).as(r.body()).isEqualTo(200);
    }
  }

  private static String query(HttpFixture f, String model, int[] tokens) {
    HttpFixture.Reply r = f.query(model, tokens);
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return r.body().replaceAll(",\"tree_sizes\":\\{[^a-z]*\\}\\},", ",");
  }

  private static String route(HttpFixture f, String id) {
    HttpFixture.Reply r =
        f.post(
            "/route",
            "{\"request_id\":\""
                + id
                + "\",\"model_name\":\"m\",\"token_ids\":"
                + HttpFixture.json(PROMPT)
                + "}");
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    assertThat(f.post("/requests/" + id + "/free", "").status()).isLessThan(300);
    return r.body();
  }

  private static final String M_TIERS =
      "\"tier_blocks\":{\"1\":{\"0\":{\"device\":4,\"host\":2,\"disk\":0,\"external\":0}},"
          + "\"2\":{\"0\":{\"device\":1,\"host\":7,\"disk\":0,\"external\":0}},"
          + "\"3\":{\"0\":{\"device\":0,\"host\":0,\"disk\":5,\"external\":0}}}";
  private static final String M2_TIERS =
      "\"tier_blocks\":{\"1\":{\"0\":{\"device\":4,\"host\":0,\"disk\":0,\"external\":0}}}";

  /** The answers that must agree between replicas, checked against the history's own. */
  private static List<String> answers(HttpFixture f) {
    List<String> out = new ArrayList<>();
    for (int n : new int[] {8, 20, 32}) {
      out.add(query(f, "m", Arrays.copyOf(PROMPT, n)));
      out.add(query(f, "m2", Arrays.copyOf(PROMPT, n)));
    }
    assertThat(out.get(4)).contains(M_TIERS);
    assertThat(out.get(5)).contains(M2_TIERS);
    String r = route(f, "r1");
    assertThat(r).contains("\"weighted_blocks\":");
    // the tier parts of each candidate (the choice and the costs hold the eviction pressure,
    // which rank 2's device removal raised and which neither a dump nor the stream replicates;
    // cached_blocks is the rank's block count, which a dump replay may lower)
    Matcher m =
        Pattern.compile(
                "\"instance_id\":\\d+|\"tier_blocks\":\\{[^}]*\\},\"weighted_blocks\":[0-9.]+")
            .matcher(r.substring(r.indexOf("\"candidates\"")));
    StringBuilder tiers = new StringBuilder();
    while (m.find()) tiers.append(m.group()).append(' ');
    assertThat(tiers).contains("\"weighted_blocks\":6.25");
    out.add(tiers.toString());
    return out;
  }

  @Test
  void aServerWarmStartedFromAPeerAnswersAsThePeerOnEveryTier() throws Exception {
    try (HttpFixture a = new HttpFixture()) {
      populate(a, true);
      List<String> expected = answers(a);
      String dump = a.get("/dump").body();
      assertThat(dump).contains("\"tiers\":[\"device\",\"host_pinned\",\"disk\"]");
      assertThat(dump).contains("\"tiers\":[\"device\",\"host_pinned\"]");
      try (HttpFixture b = new HttpFixture(KvRouterServer.Config.builder().peer(a.url))) {
        assertThat(answers(b)).isEqualTo(expected);
      }

      // a replay by hand (docs/service.md): register, then POST /events each index's
      // tiered_events; model m has blocks off the device, so its tiers come back with them
      Matcher tiered =
          Pattern.compile(
                  "\"model_name\":\"m\",.*?\"tiered_events\":(\\[.*?\\])(?=\\}(,\\{\"model_name\"|\\]\\}))")
              .matcher(dump);
      assertThat(tiered.find()).isTrue();
      try (HttpFixture r = new HttpFixture()) {
        for (int w = 1; w <= 3; w++) assertThat(r.register(w, 0, "m", BS).status()).isEqualTo(201);
        HttpFixture.Reply replayed = r.post("/events?model_name=m", tiered.group(1));
        assertThat(replayed.status()).as(replayed.body()).isEqualTo(200);
        for (int i = 0; i < 3; i++) {
          int n = new int[] {8, 20, 32}[i];
          assertThat(query(r, "m", Arrays.copyOf(PROMPT, n))).isEqualTo(expected.get(2 * i));
        }
      }

      // what a reader of an earlier version takes from the same dump: "events" alone, the device
      String old =
          dump.replaceAll(",\"tiers\":\\[[^\\]]*\\]", "")
              .replaceAll(",\"tiered_events\":\\[.*?\\](?=\\}(,\\{\"model_name\"|\\]\\}))", "");
      assertThat(old).doesNotContain("tier").doesNotContain("storage_tier");
      HttpServer oldPeer = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
      oldPeer.createContext(
          "/dump",
          ex -> {
            byte[] body = old.getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) {
              out.write(body);
            }
          });
      oldPeer.start();
      try (HttpFixture c =
          new HttpFixture(
              KvRouterServer.Config.builder()
                  .peer("http://127.0.0.1:" + oldPeer.getAddress().getPort()))) {
        // device scores as the peer's (rank 2 only up to its device hole), no tiers
        String q = query(c, "m", PROMPT);
        assertThat(q)
            .startsWith("{\"scores\":{\"1\":{\"0\":16},\"2\":{\"0\":4}}")
            .doesNotContain("tier");
        assertThat(expected.get(4)).startsWith("{\"scores\":{\"1\":{\"0\":16},\"2\":{\"0\":4}}");
      } finally {
        oldPeer.stop(0);
      }
    }
  }

  private static String awaitQuery(HttpFixture f, String model, int[] tokens, String expected) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    String q = query(f, model, tokens);
    while (!q.equals(expected)) {
      if (System.nanoTime() > deadline) return q; // the caller's assertion shows the difference
      sleep(20);
      q = query(f, model, tokens);
    }
    return q;
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Test
  void serversOnOneNatsStreamAgreeOnEveryTier() {
    Supplier<KvRouterServer.Config.Builder> none = KvRouterServer.Config::builder;
    try (NatsServer nats = NatsServer.start();
        HttpFixture a = new HttpFixture(none.get().events(nats.url()).replicaId("a"));
        HttpFixture b = new HttpFixture(none.get().events(nats.url()).replicaId("b"))) {
      for (String model : new String[] {"m", "m2"}) {
        for (int w = 1; w <= 3; w++) {
          assertThat(a.register(w, 0, model, BS).status()).isEqualTo(201);
          assertThat(b.register(w, 0, model, BS).status()).isEqualTo(201);
        }
      }
      populate(a, false); // a 400 before the stream carried tiers
      List<String> expected = answers(a);
      for (int i = 0; i < 6; i++) {
        String model = i % 2 == 0 ? "m" : "m2";
        int[] tokens = Arrays.copyOf(PROMPT, new int[] {8, 20, 32}[i / 2]);
        assertThat(awaitQuery(b, model, tokens, expected.get(i))).isEqualTo(expected.get(i));
      }
      assertThat(answers(b)).isEqualTo(expected);
      // a server started now reads the whole stream
      try (HttpFixture c = new HttpFixture(none.get().events(nats.url()).replicaId("c"))) {
        for (String model : new String[] {"m", "m2"}) {
          for (int w = 1; w <= 3; w++)
            assertThat(c.register(w, 0, model, BS).status()).isEqualTo(201);
        }
        assertThat(awaitQuery(c, "m", PROMPT, expected.get(4))).isEqualTo(expected.get(4));
        assertThat(answers(c)).isEqualTo(expected);
      }
    }
  }
}
