package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.json;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@code GET /dump} replayed into a fresh server (register its workers, {@code POST /events} its
 * events) gives equal {@code /query} answers, after a seeded random history of stores, removals
 * (holes included) and clears in two indexes.
 */
class DumpReplayTest {
  /** Worker 3's endpoint has no engine behind it: register it without waiting for one. */
  private static KvRouterServer.Config.Builder noConnectWait() {
    return KvRouterServer.Config.builder().zmqConnectTimeout(Duration.ZERO);
  }

  private record IndexDump(String model, String group, List<String> registrations, String events) {}

  @Test
  void aDumpReplayedIntoAnEmptyServerGivesEqualAnswers() throws IOException {
    long seed = new Random().nextLong();
    Random rnd = new Random(seed);
    String why = "seed " + seed;
    List<int[]> prompts = new ArrayList<>();
    try (HttpFixture a = new HttpFixture(noConnectWait())) {
      String[][] models = {{"m1", "default", "4"}, {"m2", "g", "8"}};
      for (String[] m : models) {
        for (int id = 1; id <= 3; id++) {
          for (int rank = 0; rank < (id == 2 ? 2 : 1); rank++) {
            String body =
                "{\"instance_id\":"
                    + id
                    + ",\"dp_rank\":"
                    + rank
                    + ",\"model_name\":\""
                    + m[0]
                    + "\",\"routing_group\":\""
                    + m[1]
                    + "\",\"block_size\":"
                    + m[2]
                    + (id == 3 ? ",\"endpoint\":\"tcp://127.0.0.1:5557\"" : "")
                    + "}";
            assertThat(a.post("/register", body).status()).isEqualTo(201);
          }
        }
      }
      // prompts share prefixes: a few system prompts, each extended by random suffixes
      for (int p = 0; p < 12; p++) {
        int sys = rnd.nextInt(3);
        int len = 16 + rnd.nextInt(48);
        int[] t = new int[len];
        for (int i = 0; i < len; i++) t[i] = i < 16 ? sys * 1000 + i : rnd.nextInt(50_000);
        prompts.add(t);
      }
      for (String[] m : models) {
        int bs = Integer.parseInt(m[2]);
        BlockHasher hasher = BlockHasher.of(bs);
        Map<Worker, Long> ids = new HashMap<>();
        for (int batch = 0; batch < 10; batch++) {
          List<RouterEvent> events = new ArrayList<>();
          for (int k = 0; k < 8; k++) {
            int id = 1 + rnd.nextInt(3);
            Worker w = new Worker(id, id == 2 ? rnd.nextInt(2) : 0);
            long eid = ids.merge(w, 1L, Long::sum);
            long[] local = hasher.localHashes(prompts.get(rnd.nextInt(prompts.size())));
            long[] seq = SequenceHasher.sequenceHashes(local);
            int roll = rnd.nextInt(10);
            if (roll < 6 || local.length == 0) {
              events.add(new RouterEvent(w, eid, CacheEvent.storedAtRoot(seq, local)));
            } else if (roll < 9) {
              int from = rnd.nextInt(seq.length);
              int to = Math.min(seq.length, from + 1 + rnd.nextInt(3));
              long[] gone = Arrays.copyOfRange(seq, from, to);
              events.add(new RouterEvent(w, eid, CacheEvent.removed(gone)));
            } else {
              events.add(new RouterEvent(w, eid, CacheEvent.cleared()));
            }
          }
          String q = "?model_name=" + m[0] + "&routing_group=" + m[1];
          assertThat(a.post(q.isEmpty() ? "/events" : "/events" + q, writeEvents(events)).status())
              .as(why)
              .isEqualTo(200);
        }
      }

      HttpFixture.Reply dump = a.get("/dump");
      assertThat(dump.status()).isEqualTo(200);
      List<IndexDump> indexes = parse(dump.body());
      assertThat(indexes).extracting(IndexDump::model).containsExactly("m1", "m2");

      try (HttpFixture b = new HttpFixture(noConnectWait())) {
        for (IndexDump d : indexes) {
          for (String reg : d.registrations()) {
            assertThat(b.post("/register", reg).status()).as(reg).isEqualTo(201);
          }
          assertThat(
                  b.post(
                          "/events?model_name=" + d.model() + "&routing_group=" + d.group(),
                          d.events())
                      .status())
              .as(why)
              .isEqualTo(200);
        }
        assertThat(b.get("/workers").body()).isEqualTo(a.get("/workers").body());
        int compared = 0;
        for (String[] m : models) {
          for (int[] p : prompts) {
            for (int cut : new int[] {p.length, p.length / 2, 16}) {
              int[] t = Arrays.copyOf(p, cut);
              String body =
                  "{\"model_name\":\""
                      + m[0]
                      + "\",\"routing_group\":\""
                      + m[1]
                      + "\",\"token_ids\":"
                      + json(t)
                      + "}";
              HttpFixture.Reply ra = a.post("/query", body);
              HttpFixture.Reply rb = b.post("/query", body);
              assertThat(ra.status()).isEqualTo(200);
              // scores and blocks must agree (DESIGN.md §4 rule 7); tree sizes may not, since a
              // dump carries a worker's connected blocks only
              assertThat(scoresOf(rb.body())).as(why).isEqualTo(scoresOf(ra.body()));
              compared++;
            }
          }
        }
        assertThat(compared).isEqualTo(2 * prompts.size() * 3);
      }
    }
  }

  private static String scoresOf(String queryAnswer) {
    return queryAnswer.substring(0, queryAnswer.indexOf(",\"tree_sizes\""));
  }

  private static String writeEvents(List<RouterEvent> events) {
    return RouterEventJson.writeEvents(events);
  }

  /** Reads the dump: per index, its registrations as /register bodies and its events' text. */
  private static List<IndexDump> parse(String dump) throws IOException {
    List<IndexDump> out = new ArrayList<>();
    try (JsonParser p = new JsonFactory().createParser(dump)) {
      expect(p.nextToken(), JsonToken.START_OBJECT);
      expect(p.nextToken(), JsonToken.FIELD_NAME);
      assertThat(p.currentName()).isEqualTo("indexes");
      expect(p.nextToken(), JsonToken.START_ARRAY);
      while (p.nextToken() == JsonToken.START_OBJECT) {
        String model = null;
        String group = null;
        int blockSize = 0;
        List<String> regs = new ArrayList<>();
        String events = null;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String name = p.currentName();
          JsonToken t = p.nextToken();
          switch (name) {
            case "model_name" -> model = p.getText();
            case "routing_group" -> group = p.getText();
            case "block_size" -> blockSize = p.getIntValue();
            case "workers" -> {
              expect(t, JsonToken.START_ARRAY);
              while (p.nextToken() == JsonToken.START_OBJECT) {
                int start = (int) p.currentTokenLocation().getCharOffset();
                p.skipChildren();
                int end = (int) p.currentTokenLocation().getCharOffset() + 1;
                regs.add(dump.substring(start, end));
              }
            }
            case "events" -> {
              expect(t, JsonToken.START_ARRAY);
              int start = (int) p.currentTokenLocation().getCharOffset();
              p.skipChildren();
              int end = (int) p.currentTokenLocation().getCharOffset() + 1;
              events = dump.substring(start, end);
            }
            default -> p.skipChildren();
          }
        }
        assertThat(blockSize).isPositive();
        // a dumped registration is a valid /register body (it carries block_size and the rest)
        out.add(new IndexDump(model, group, regs, events));
      }
    }
    return out;
  }

  private static void expect(JsonToken actual, JsonToken expected) {
    assertThat(actual).isEqualTo(expected);
  }
}
