package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.Tier;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.json.EventDecodeException;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.ClearScope;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The warm start of {@code serve --peer URL}: loads a running replica's {@code GET /dump} (its
 * registrations and every index's events) into this server before it serves, so that {@code /query}
 * answers as the peer does.
 *
 * <pre>
 * Implementation notes
 *
 * Runs once, on the thread of KvRouterServer.start(), after the webserver is listening but
 * before the server serves (Api answers 503 on everything but /health, /ready and /metrics
 * meanwhile), so nothing else registers or applies events concurrently. The dump is read whole
 * into memory (it was built whole by the peer), parsed with Jackson's streaming parser: each
 * index's registrations go through the same path as POST /register (ZMQ listeners of ranks with
 * an endpoint are started without waiting for their connection; /ready waits for them within
 * the grace period), then its events are applied as one batch with unregistered ranks accepted,
 * so the index equals the peer's even when the peer runs with --accept-unregistered. An index
 * dumped with tiers (JsonOut.dump: "tiers" and "tiered_events") gets those tiers first, then the
 * tiered events, each on its tier ("events", then only the device part of the same list, is not
 * applied); a dump without them (an older peer, or no tiers) is applied from "events" as device
 * events. Any failure
 * (unreachable, non-200, malformed JSON, a registration the peer's own dump contradicts) is an
 * IllegalStateException naming the peer and the place; the caller stops the server.
 * </pre>
 */
final class PeerWarmStart {
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
  private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(120);

  private PeerWarmStart() {}

  /** Normalises {@code url} ({@code http://host:port}, no trailing slash) or throws IAE. */
  static String checkUrl(String url) {
    String u = url.trim();
    while (u.endsWith("/")) u = u.substring(0, u.length() - 1);
    URI uri;
    try {
      uri = URI.create(u);
    } catch (IllegalArgumentException e) {
      uri = null;
    }
    if (uri == null
        || !"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())
        || uri.getHost() == null) {
      throw new IllegalArgumentException(
          "peer: '" + url + "' is not an http://host:port URL of a running kvrouter serve");
    }
    return u;
  }

  /**
   * Loads the peer's dump into {@code registry} through {@code api}'s registration path.
   *
   * @throws IllegalStateException when the peer cannot be reached or its answer is not a dump
   */
  static KvRouterServer.WarmStart load(String peer, Api api, Registry registry) {
    byte[] body = fetch(peer);
    try {
      return apply(peer, body, api, registry);
    } catch (JsonParseException e) {
      throw new IllegalStateException(
          "warm start: the answer of " + peer + "/dump is not JSON: " + e.getOriginalMessage(), e);
    } catch (IOException e) {
      throw new IllegalStateException(
          "warm start: cannot read the answer of " + peer + "/dump: " + e, e);
    }
  }

  private static byte[] fetch(String peer) {
    HttpClient client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(CONNECT_TIMEOUT)
            .build();
    HttpResponse<byte[]> r;
    try {
      r =
          client.send(
              HttpRequest.newBuilder(URI.create(peer + "/dump")).timeout(REQUEST_TIMEOUT).build(),
              HttpResponse.BodyHandlers.ofByteArray());
    } catch (IOException e) {
      throw new IllegalStateException(
          "warm start: cannot reach the peer "
              + peer
              + " (GET /dump): "
              + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage())
              + "; is a kvrouter serve listening there?",
          e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("warm start: interrupted while loading " + peer, e);
    } finally {
      client.close();
    }
    if (r.statusCode() != 200) {
      String text = new String(r.body(), StandardCharsets.UTF_8);
      if (text.length() > 200) text = text.substring(0, 200) + "...";
      throw new IllegalStateException(
          "warm start: the peer "
              + peer
              + " answered GET /dump with "
              + r.statusCode()
              + ": "
              + text);
    }
    return r.body();
  }

  private static KvRouterServer.WarmStart apply(
      String peer, byte[] body, Api api, Registry registry) throws IOException {
    int indexes = 0;
    int workers = 0;
    long events = 0;
    Set<String> models = new HashSet<>();
    try (JsonParser p = JsonBody.FACTORY.createParser(body)) {
      expect(p, p.nextToken(), JsonToken.START_OBJECT, peer, "the dump");
      boolean sawIndexes = false;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken t = p.nextToken();
        if (!field.equals("indexes")) {
          p.skipChildren();
          continue;
        }
        sawIndexes = true;
        expect(p, t, JsonToken.START_ARRAY, peer, "indexes");
        while (p.nextToken() != JsonToken.END_ARRAY) {
          String where = "indexes[" + indexes + "]";
          expect(p, p.currentToken(), JsonToken.START_OBJECT, peer, where);
          long[] counts = index(p, peer, where, api, registry, models);
          workers += (int) counts[0];
          events += counts[1];
          indexes++;
        }
      }
      if (!sawIndexes) {
        throw new IllegalStateException(
            "warm start: the answer of " + peer + "/dump has no \"indexes\" field: not a dump");
      }
    }
    long blocks = 0; // the server was empty before: what its indexes hold is what was loaded
    for (ModelIndex m : registry.indexes()) blocks += m.router.index().stats().blocksIndexed();
    return new KvRouterServer.WarmStart(models.size(), indexes, workers, events, blocks);
  }

  /**
   * One index: registers its workers, applies its events and adds its model to {@code models};
   * returns {workers, events}.
   */
  private static long[] index(
      JsonParser p, String peer, String where, Api api, Registry registry, Set<String> models)
      throws IOException {
    DumpedIndex d = readIndex(p, peer, where);
    ModelKey key = new ModelKey(d.model(), d.group());
    for (DumpedWorker w : d.workers()) register(api, key, d.blockSize(), w, peer);
    List<TieredEvent> tiered;
    try {
      tiered =
          RouterEventJson.readTieredEvents(
              d.tieredEvents() != null ? d.tieredEvents() : d.events());
    } catch (EventDecodeException e) {
      throw new IllegalStateException(
          "warm start: "
              + where
              + (d.tieredEvents() != null ? ".tiered_events" : ".events")
              + " of "
              + peer
              + "/dump: "
              + e.getMessage(),
          e);
    }
    // a rank tracked by predictions takes no events: the peer's predictions of it are not carried
    // over (this server predicts it afresh)
    ModelIndex target = registry.get(key);
    if (target != null) {
      tiered = new ArrayList<>(tiered);
      tiered.removeIf(te -> target.router.kvSource(te.event().worker()) == KvSource.PREDICTED);
    }
    List<RouterEvent> decoded = new ArrayList<>(tiered.size());
    for (TieredEvent te : tiered) decoded.add(te.event());
    if (d.slowest() != Tier.DEVICE) {
      ModelIndex m = registry.get(key);
      if (m != null) m.addTiers(d.slowest());
    }
    if (!decoded.isEmpty()) {
      ModelIndex m = registry.get(key);
      if (m == null) {
        throw new IllegalStateException(
            "warm start: "
                + where
                + " of "
                + peer
                + "/dump has events but no registered worker: not a kvrouter dump");
      }
      m.applyTieredEvents(tiered, decoded, true);
      m.router.index().flush();
    }
    models.add(d.model());
    return new long[] {d.workers().size(), decoded.size()};
  }

  /**
   * One index of a dump as read: its key, block size, workers, its events (and tiered events) as
   * JSON bytes, and the slowest tier it lists.
   */
  private record DumpedIndex(
      String model,
      String group,
      int blockSize,
      List<DumpedWorker> workers,
      byte[] events,
      byte[] tieredEvents,
      Tier slowest) {}

  /** Reads one object of {@code indexes}, checking that it has what a dump's index has. */
  private static DumpedIndex readIndex(JsonParser p, String peer, String where) throws IOException {
    String model = null;
    String group = null;
    int blockSize = -1;
    List<DumpedWorker> workers = new ArrayList<>();
    byte[] events = null;
    byte[] tieredEvents = null;
    Tier slowest = Tier.DEVICE;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String f = p.currentName();
      JsonToken t = p.nextToken();
      switch (f) {
        case "model_name" -> model = text(p, t, peer, where + ".model_name");
        case "routing_group" -> group = text(p, t, peer, where + ".routing_group");
        case "block_size" -> {
          expect(p, t, JsonToken.VALUE_NUMBER_INT, peer, where + ".block_size");
          blockSize = p.getIntValue();
        }
        case "workers" -> {
          expect(p, t, JsonToken.START_ARRAY, peer, where + ".workers");
          while (p.nextToken() != JsonToken.END_ARRAY) {
            workers.add(worker(p, peer, where + ".workers[" + workers.size() + "]"));
          }
        }
        case "events" -> events = copyArray(p, t, peer, where + ".events");
        case "tiered_events" -> tieredEvents = copyArray(p, t, peer, where + ".tiered_events");
        case "tiers" -> slowest = slowestTier(p, t, peer, where, slowest);
        default -> p.skipChildren();
      }
    }
    if (model == null || blockSize < 1 || events == null) {
      throw new IllegalStateException(
          "warm start: "
              + where
              + " of "
              + peer
              + "/dump lacks model_name, block_size or events: not a dump");
    }
    return new DumpedIndex(model, group, blockSize, workers, events, tieredEvents, slowest);
  }

  /** The JSON array at {@code t}, copied as it is. */
  private static byte[] copyArray(JsonParser p, JsonToken t, String peer, String where)
      throws IOException {
    expect(p, t, JsonToken.START_ARRAY, peer, where);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.copyCurrentStructure(p);
    }
    return out.toByteArray();
  }

  /** The slowest of {@code slowest} and the tiers the array at {@code t} names. */
  private static Tier slowestTier(
      JsonParser p, JsonToken t, String peer, String where, Tier slowest) throws IOException {
    expect(p, t, JsonToken.START_ARRAY, peer, where + ".tiers");
    for (int i = 0; (t = p.nextToken()) != JsonToken.END_ARRAY; i++) {
      Tier named = tier(text(p, t, peer, where + ".tiers[" + i + "]"));
      if (named == null) {
        throw new IllegalStateException(
            "warm start: "
                + where
                + ".tiers["
                + i
                + "] of "
                + peer
                + "/dump: unknown tier '"
                + p.getText()
                + "' (expected device, host_pinned, disk or external)");
      }
      if (named.ordinal() > slowest.ordinal()) slowest = named;
    }
    return slowest;
  }

  /** Registers one dumped worker as {@code POST /register} would, without waiting for it. */
  private static void register(Api api, ModelKey key, int blockSize, DumpedWorker w, String peer) {
    try {
      api.register(
          key,
          blockSize,
          w.worker(),
          w.endpoint(),
          w.replay(),
          w.topic(),
          w.engineBlockSize() > 0 ? w.engineBlockSize() : blockSize,
          w.kvBlocks(),
          w.baseUrl(),
          w.role(),
          w.clearScope(),
          w.kvSource(),
          Duration.ZERO);
    } catch (ApiException e) {
      throw new IllegalStateException(
          "warm start: cannot register instance "
              + Long.toUnsignedString(w.worker().workerId())
              + " dp_rank "
              + w.worker().dpRank()
              + " of "
              + key.describe()
              + " from "
              + peer
              + ": "
              + e.getMessage(),
          e);
    }
  }

  private record DumpedWorker(
      Worker worker,
      String endpoint,
      String replay,
      String topic,
      int engineBlockSize,
      long kvBlocks,
      String baseUrl,
      EngineRole role,
      ClearScope clearScope,
      KvSource kvSource) {}

  private static DumpedWorker worker(JsonParser p, String peer, String where) throws IOException {
    expect(p, p.currentToken(), JsonToken.START_OBJECT, peer, where);
    Long instance = null;
    int rank = 0;
    String endpoint = null;
    String replay = null;
    String topic = null;
    long kvBlocks = 0;
    int engineBlockSize = 0;
    String baseUrl = null;
    EngineRole role = EngineRole.BOTH;
    ClearScope clearScope = ClearScope.DEVICE;
    KvSource kvSource = null; // a dump of an earlier version: decided again at registration
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String f = p.currentName();
      JsonToken t = p.nextToken();
      switch (f) {
        case "instance_id" -> {
          expect(p, t, JsonToken.VALUE_NUMBER_INT, peer, where + ".instance_id");
          instance = p.getBigIntegerValue().longValue(); // unsigned u64: keep the bits
        }
        case "dp_rank" -> {
          expect(p, t, JsonToken.VALUE_NUMBER_INT, peer, where + ".dp_rank");
          rank = p.getIntValue();
        }
        case "endpoint" -> endpoint = optText(p, t, peer, where + ".endpoint");
        case "replay_endpoint" -> replay = optText(p, t, peer, where + ".replay_endpoint");
        case "topic" -> topic = optText(p, t, peer, where + ".topic");
        case "base_url" -> baseUrl = optText(p, t, peer, where + ".base_url");
        case "role" -> {
          String v = optText(p, t, peer, where + ".role");
          role = v == null ? EngineRole.BOTH : EngineRole.parse(v);
        }
        case "all_blocks_cleared" -> {
          String v = optText(p, t, peer, where + ".all_blocks_cleared");
          clearScope = v == null ? ClearScope.DEVICE : ClearScope.parse(v);
        }
        case "kv_source" -> {
          String v = optText(p, t, peer, where + ".kv_source");
          kvSource = v == null ? null : KvSource.parse(v);
        }
        case "engine_block_size" -> {
          expect(p, t, JsonToken.VALUE_NUMBER_INT, peer, where + ".engine_block_size");
          engineBlockSize = p.getIntValue();
        }
        case "capacity_blocks", "kv_blocks" -> {
          expect(p, t, JsonToken.VALUE_NUMBER_INT, peer, where + "." + f);
          kvBlocks = p.getLongValue();
        }
        default -> p.skipChildren();
      }
    }
    if (instance == null) {
      throw new IllegalStateException(
          "warm start: " + where + " of " + peer + "/dump has no instance_id: not a dump");
    }
    return new DumpedWorker(
        new Worker(instance, rank),
        endpoint,
        replay,
        topic,
        engineBlockSize,
        kvBlocks,
        baseUrl,
        role,
        clearScope,
        kvSource);
  }

  /** The tier of one of Dynamo's {@code storage_tier} names, or null. */
  private static Tier tier(String name) {
    for (StorageTier t : StorageTier.values()) {
      if (RouterEventJson.storageTierName(t).equals(name)) {
        return Tier.valueOf(t.name());
      }
    }
    return null;
  }

  private static String text(JsonParser p, JsonToken t, String peer, String where)
      throws IOException {
    expect(p, t, JsonToken.VALUE_STRING, peer, where);
    return p.getText();
  }

  private static String optText(JsonParser p, JsonToken t, String peer, String where)
      throws IOException {
    return t == JsonToken.VALUE_NULL ? null : text(p, t, peer, where);
  }

  private static void expect(JsonParser p, JsonToken t, JsonToken want, String peer, String where) {
    if (t != want) {
      throw new IllegalStateException(
          "warm start: "
              + where
              + " of "
              + peer
              + "/dump: expected "
              + want.asString()
              + " ("
              + want
              + "), found "
              + t
              + " at line "
              + p.currentLocation().getLineNr()
              + ", column "
              + p.currentLocation().getColumnNr()
              + ": not a kvrouter dump");
    }
  }
}
