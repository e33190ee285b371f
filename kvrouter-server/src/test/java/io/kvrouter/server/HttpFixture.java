package io.kvrouter.server;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.transport.json.RouterEventJson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;

/** A started server on a random loopback port and a client for it; close it after the test. */
final class HttpFixture implements AutoCloseable {
  /** An answer: status, body and the headers the tests look at. */
  record Reply(int status, String body, HttpResponse<String> raw) {
    String header(String name) {
      return raw.headers().firstValue(name).orElse(null);
    }

    @Override
    public String toString() {
      return status + " " + body;
    }
  }

  static final HttpClient CLIENT =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  final KvRouterServer server;
  final String url;
  String token;

  HttpFixture(KvRouterServer.Config.Builder config) {
    this(config, null);
  }

  /** A server with {@code extension}'s routes (null: none). */
  HttpFixture(KvRouterServer.Config.Builder config, ServerExtension extension) {
    this.server = KvRouterServer.start(config.host("127.0.0.1").port(0).build(), extension);
    this.url = server.url();
  }

  HttpFixture() {
    this(KvRouterServer.Config.builder());
  }

  Reply get(String path) {
    return send(HttpRequest.newBuilder(URI.create(url + path)).GET());
  }

  Reply post(String path, String json) {
    return send(
        HttpRequest.newBuilder(URI.create(url + path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json)));
  }

  Reply send(HttpRequest.Builder b) {
    if (token != null) b.header("Authorization", "Bearer " + token);
    try {
      HttpResponse<String> r =
          CLIENT.send(
              b.timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
      return new Reply(r.statusCode(), r.body(), r);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  Reply register(long instance, int dpRank, String model, int blockSize) {
    return post(
        "/register",
        "{\"instance_id\":"
            + Long.toUnsignedString(instance)
            + ",\"dp_rank\":"
            + dpRank
            + ",\"model_name\":\""
            + model
            + "\",\"block_size\":"
            + blockSize
            + "}");
  }

  Reply events(String model, List<RouterEvent> events) {
    return post("/events?model_name=" + model, RouterEventJson.writeEvents(events));
  }

  Reply query(String model, int[] tokens) {
    return post("/query", "{\"model_name\":\"" + model + "\",\"token_ids\":" + json(tokens) + "}");
  }

  @Override
  public void close() {
    server.stop();
  }

  // ------------------------------------------------------------------ data

  static String json(int[] tokens) {
    StringJoiner j = new StringJoiner(",", "[", "]");
    for (int t : tokens) j.add(Integer.toUnsignedString(t));
    return j.toString();
  }

  static int[] range(int from, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) t[i] = from + i;
    return t;
  }

  /** The Stored event of {@code worker} caching the full blocks of {@code tokens} from the root. */
  static RouterEvent stored(Worker worker, long eventId, int[] tokens, int blockSize) {
    long[] local = BlockHasher.of(blockSize).localHashes(tokens);
    return new RouterEvent(
        worker, eventId, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
  }

  /** The Stored event with the given salted hasher. */
  static RouterEvent stored(Worker worker, long eventId, int[] tokens, BlockHasher hasher) {
    long[] local = hasher.localHashes(tokens);
    return new RouterEvent(
        worker, eventId, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
  }

  static List<RouterEvent> list(RouterEvent... events) {
    return new ArrayList<>(List.of(events));
  }
}
