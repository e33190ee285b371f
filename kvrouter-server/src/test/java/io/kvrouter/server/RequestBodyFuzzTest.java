package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.transport.fuzz.JsonMutator;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Fuzzes the HTTP request body parsers (JsonBody and every endpoint's reading of it, and the {@code
 * /events} batch decoder) through a started server: seeded mutations of valid bodies of every POST
 * endpoint (byte flips, truncation, insertion, splicing, type confusion, huge numbers, deep
 * nesting, huge arrays, bytes that are not UTF-8) go over one keep-alive connection.
 *
 * <p>For every input: the answer is 2xx or 4xx, never 5xx (except {@code /route}'s documented 503
 * when no allowed worker is left), and every refusal is {@code {"error": ...}}. A refusal on a
 * mutating endpoint leaves the server's state as it was: {@code GET /dump} (registrations and index
 * contents) compared before and after every {@code kvrouter.fuzz.dumpEvery}-th such refusal
 * (default: every one; the "before" dump is the last one fetched, valid until something is
 * accepted). Per server, the server's own counters agree with what the client saw: 4xx answers by
 * endpoint ({@code kvrouter_http_requests_total}), rejected event batches and decode errors.
 *
 * <p>Inputs: {@code -Dkvrouter.fuzz.inputs} (default 20,000), seed {@code -Dkvrouter.fuzz.seed}
 * (default 9); a fresh server every 5,000 inputs.
 */
class RequestBodyFuzzTest {
  private static final int INPUTS = Integer.getInteger("kvrouter.fuzz.inputs", 20_000);
  private static final long SEED = Long.getLong("kvrouter.fuzz.seed", 9L);
  private static final int DUMP_EVERY = Integer.getInteger("kvrouter.fuzz.dumpEvery", 1);
  private static final int PER_SERVER = 5_000;
  private static final int LIMIT = 256 << 10;

  private static final String[] PATHS = {
    "/register", "/unregister", "/query", "/query_by_hash", "/route", "/events?model_name=m"
  };
  private static final boolean[] MUTATING = {true, true, false, false, true, true};

  /** What the client saw from one server, to check against the server's counters. */
  private static final class Seen {
    final Map<String, Integer> fourXx = new LinkedHashMap<>();
    int unrouted; // 413s Helidon gives before routing (declared length over the limit)
    int eventRejects;
    int eventDecodeErrors;
  }

  @Test
  void mutatedBodiesGetA4xxAreCountedAndChangeNothing() throws IOException {
    Random rnd = new Random(SEED);
    List<JsonMutator> mutators = new ArrayList<>();
    for (List<String> seeds : seeds()) mutators.add(new JsonMutator(seeds, rnd));
    long rejects = 0;
    long accepted = 0;
    long routing503 = 0;
    long dumps = 0;
    long exceptions = 0;
    List<String> failures = new ArrayList<>();
    long t0 = System.nanoTime();
    int done = 0;
    while (done < INPUTS) {
      try (HttpFixture http = new HttpFixture(KvRouterServer.Config.builder().maxBodyBytes(LIMIT));
          RawHttp client = new RawHttp("127.0.0.1", http.server.port())) {
        http.register(1, 0, "m", 4);
        http.events("m", List.of(stored(new Worker(1, 0), 1, range(0, 16), 4)));
        Seen seen = new Seen();
        String dump = null; // the state as last fetched, while nothing was accepted since
        for (int n = 0; n < PER_SERVER && done < INPUTS; n++, done++) {
          int e = rnd.nextInt(PATHS.length);
          JsonMutator m = mutators.get(e);
          byte[] body = rnd.nextInt(8) == 0 ? m.seed().getBytes(StandardCharsets.UTF_8) : m.next();
          boolean check = MUTATING[e] && rejects % DUMP_EVERY == 0;
          if (check && dump == null) dump = client.get("/dump").body();
          RawHttp.Answer a;
          try {
            a = client.post(PATHS[e], body);
          } catch (IOException x) {
            if (body.length > HttpPlumbing.helidonPayloadLimit(LIMIT)) {
              // refused by Helidon before the body was all written: the 413 was lost with the
              // connection, which Helidon closes at once that far over the limit
              seen.unrouted++;
              rejects++;
              continue;
            }
            exceptions++;
            failure(failures, done, PATHS[e], body, "no answer: " + x);
            continue;
          }
          String what = PATHS[e] + " -> " + a.status() + " " + abbreviate(a.body());
          if (a.status() >= 200 && a.status() < 300) {
            accepted++;
            if (MUTATING[e] && e != 4) dump = null; // /route changes no dump, only loads
          } else if (a.status() >= 400 && a.status() < 500) {
            rejects++;
            if (!a.body().startsWith("{\"error\":")) {
              failure(failures, done, PATHS[e], body, "refusal without {\"error\"}: " + what);
            }
            if (a.status() == 413 && body.length > HttpPlumbing.helidonPayloadLimit(LIMIT)) {
              seen.unrouted++; // refused by Helidon before routing
            } else {
              seen.fourXx.merge(endpointOf(PATHS[e]), 1, Integer::sum);
              if (e == 5 && a.status() != 413) { // a body over the limit is no batch
                seen.eventRejects++;
                if (a.body().startsWith("{\"error\":\"events: ")) seen.eventDecodeErrors++;
              }
            }
            if (check) {
              dumps++;
              String after = client.get("/dump").body();
              if (!after.equals(dump)) {
                failure(failures, done, PATHS[e], body, "a refusal changed /dump: " + what);
                dump = after;
              }
            }
          } else if (a.status() == 503 && e == 4) {
            routing503++; // documented: no allowed worker (allowed_instances mutated)
          } else {
            exceptions++;
            failure(failures, done, PATHS[e], body, "answered " + what);
          }
        }
        checkCounters(http, seen, failures);
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    String summary =
        String.format(
            "FUZZ HTTP request bodies: seed %d, inputs %d, rejected %d, accepted %d, /route 503 %d,"
                + " dumps compared %d, exceptions (5xx or no answer) %d, failures %d, %.1f s",
            SEED,
            INPUTS,
            rejects,
            accepted,
            routing503,
            dumps,
            exceptions,
            failures.size(),
            seconds);
    System.out.println(summary);
    assertThat(failures).as(summary).isEmpty();
    assertThat(rejects + accepted + routing503).isEqualTo(INPUTS);
    assertThat(rejects).isGreaterThan(INPUTS / 4);
    assertThat(accepted).isGreaterThan(INPUTS / 20);
  }

  /** The server's counters agree with what the client saw. */
  private static void checkCounters(HttpFixture http, Seen seen, List<String> failures) {
    String metrics = http.get("/metrics").body();
    for (String p : PATHS) {
      String ep = endpointOf(p);
      double counted = HostileClientsTest.counter(metrics, ep, "4xx");
      if (counted != seen.fourXx.getOrDefault(ep, 0)) {
        failures.add(
            ep + ": the server counted " + counted + " 4xx, the client saw " + seen.fourXx);
      }
    }
    double unrouted = HostileClientsTest.counter(metrics, "unrouted", "4xx");
    if (unrouted != seen.unrouted) {
      failures.add("unrouted: counted " + unrouted + " 4xx, the client saw " + seen.unrouted);
    }
    double batches = sum(metrics, "kvrouter_event_batches_rejected_total{");
    double decode = sum(metrics, "kvrouter_event_decode_errors_total{");
    if (batches != seen.eventRejects || decode != seen.eventDecodeErrors) {
      failures.add(
          "/events: counted "
              + batches
              + " rejected batches and "
              + decode
              + " decode errors, the client saw "
              + seen.eventRejects
              + " and "
              + seen.eventDecodeErrors);
    }
    HostileClientsTest.assertNo5xxBut(metrics, "/route");
  }

  private static double sum(String metrics, String prefix) {
    double s = 0;
    for (String line : metrics.split("\n")) {
      if (line.startsWith(prefix))
        s += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
    }
    return s;
  }

  private static String endpointOf(String path) {
    int q = path.indexOf('?');
    return q < 0 ? path : path.substring(0, q);
  }

  private static void failure(List<String> failures, int i, String path, byte[] body, String what) {
    if (failures.size() >= 20) return;
    String text = new String(body, 0, Math.min(body.length, 300), StandardCharsets.UTF_8);
    failures.add(
        "input "
            + i
            + " "
            + path
            + " ("
            + body.length
            + " bytes: "
            + text
            + (body.length > 300 ? "..." : "")
            + ", hex of first 32: "
            + HexFormat.of().formatHex(body, 0, Math.min(32, body.length))
            + "): "
            + what);
  }

  private static String abbreviate(String s) {
    return s.length() <= 200 ? s : s.substring(0, 197) + "...";
  }

  /** Valid bodies of each endpoint, in the order of {@link #PATHS}. */
  static List<List<String>> seeds() {
    List<RouterEvent> events =
        List.of(
            stored(new Worker(1, 0), 2, range(0, 8), 4),
            stored(new Worker(1, 0), 3, range(100, 12), 4),
            new RouterEvent(new Worker(1, 0), 4, CacheEvent.removed(new long[] {5, -1})),
            new RouterEvent(new Worker(1, 0), 5, CacheEvent.cleared()));
    List<String> batches = new ArrayList<>();
    batches.add(RouterEventJson.writeEvents(events));
    for (RouterEvent e : events) batches.add("[" + RouterEventJson.writeEvent(e) + "]");
    batches.add("[]");
    return List.of(
        List.of(
            "{\"instance_id\":5,\"model_name\":\"m\",\"block_size\":4,\"dp_rank\":1,"
                + "\"endpoint\":null,\"kv_blocks\":100}",
            "{\"instance_id\":18446744073709551615,\"model_name\":\"m\",\"block_size\":4,"
                + "\"routing_group\":\"g\",\"tenant_id\":\"g\",\"replay_endpoint\":\"x\"}",
            "{\"instance_id\":-7,\"model_name\":\"m2\",\"block_size\":16,\"extra\":[1,{\"a\":2}]}"),
        List.of(
            "{\"instance_id\":5,\"model_name\":\"m\",\"dp_rank\":1}",
            "{\"instance_id\":1,\"model_name\":\"m\",\"routing_group\":\"default\"}"),
        List.of(
            "{\"model_name\":\"m\",\"token_ids\":[0,1,2,3,4,5,6,7],\"lora_name\":null}",
            "{\"token_ids\":[0, 1, 2, 3],\"model_name\":\"m\",\"cache_salt\":\"s\","
                + "\"routing_group\":\"default\"}",
            "{\"model_name\":\"m\",\"token_ids\":[4294967295,0,7,7],\"lora_name\":\"l\"}"),
        List.of(
            "{\"model_name\":\"m\",\"block_hashes\":[1,18446744073709551615,-5]}",
            "{\"block_hashes\":[],\"model_name\":\"m\",\"tenant_id\":\"default\"}"),
        List.of(
            "{\"request_id\":\"r\",\"model_name\":\"m\",\"token_ids\":[0,1,2,3],"
                + "\"allowed_instances\":[1]}",
            "{\"request_id\":\"q\",\"model_name\":\"m\",\"token_ids\":[0,1,2,3,4,5,6,7],"
                + "\"lora_name\":null,\"cache_salt\":null}"),
        batches);
  }
}
