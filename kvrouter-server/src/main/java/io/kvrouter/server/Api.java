package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.http.RequestException;
import io.helidon.http.Status;
import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.route.Candidate;
import io.kvrouter.route.CandidateCost;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.transport.json.EventDecodeException;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.zmq.IngestStats;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * The HTTP endpoints: request parsing, the calls into the {@link Registry} and the routers, and the
 * JSON answers (see {@code docs/service.md} for the API).
 *
 * <pre>
 * Implementation notes
 *
 * Helidon runs every request's handler on its own virtual thread. Every endpoint goes through
 * endpoint(), which checks the bearer token of mutating endpoints, runs the handler, turns an
 * ApiException into {"error": ...} with its status (and anything unexpected into a logged 500),
 * and records the request in the metrics under the endpoint's path pattern (never the raw path,
 * to bound label cardinality). Handlers send their own success answer and return its status.
 *
 * Bodies are read whole, then parsed (a body over the limit is a 413: declared lengths beyond the
 * limit plus SWALLOW_BYTES are refused by Helidon, which closes the connection; smaller ones, and
 * chunked bodies that grow past the limit, by body(), after which Helidon drains what is left so
 * the client reads the 413 instead of a reset), then parsed by JsonBody or RouterEventJson before anything changes, so a bad request changes
 * nothing. body() refuses a Content-Type that is not JSON (415), and a body read that fails
 * because the client hung up (400) or ReadDeadline cut it off (408) becomes an ApiException
 * marked connectionLost: counted, never a 500, answered only if the socket still takes it.
 * /events batches are decoded and applied on an ingest thread (a platform thread the
 * server owns), not on the request's virtual thread: see onIngestThread. Handlers hold no state of their own: everything shared lives in the Registry, its
 * ModelIndex objects and ServerMetrics.
 * </pre>
 */
final class Api {
  private static final System.Logger LOG = System.getLogger(Api.class.getName());
  private static final String JSON = "application/json";
  private static final int MAX_REQUEST_ID = 512;

  /** One endpoint's work; sends its own success answer and returns its status. */
  @FunctionalInterface
  private interface Endpoint {
    int handle(ServerRequest req, ServerResponse res) throws Exception;
  }

  private final Registry registry;
  private final ServerMetrics metrics;
  private final BearerAuth auth;
  private final boolean acceptUnregistered;
  private final long maxBodyBytes;
  private final Supplier<KvRouterServer.Readiness> ready;
  private final BooleanSupplier serving;
  private final ExecutorService ingest;
  private final java.time.Duration zmqConnectTimeout;

  /** How long /events in NATS mode waits for this server's replica to apply what it published. */
  private static final java.time.Duration NATS_APPLY_WAIT =
      java.time.Duration.ofMillis(Long.getLong("kvrouter.natsApplyWaitMs", 10_000));

  Api(
      Registry registry,
      ServerMetrics metrics,
      BearerAuth auth,
      boolean acceptUnregistered,
      long maxBodyBytes,
      Supplier<KvRouterServer.Readiness> ready,
      BooleanSupplier serving,
      java.time.Duration zmqConnectTimeout,
      ExecutorService ingest) {
    this.ingest = ingest;
    this.serving = serving;
    this.zmqConnectTimeout = zmqConnectTimeout;
    this.registry = registry;
    this.metrics = metrics;
    this.auth = auth;
    this.acceptUnregistered = acceptUnregistered;
    this.maxBodyBytes = maxBodyBytes;
    this.ready = ready;
  }

  /** Adds every endpoint, 405 for a known path with another method, and 404 for the rest. */
  void routing(HttpRouting.Builder r) {
    add(r, Method.POST, "/register", true, this::register);
    add(r, Method.POST, "/unregister", true, this::unregister);
    add(r, Method.GET, "/workers", false, this::workers);
    add(r, Method.POST, "/query", false, this::query);
    add(r, Method.POST, "/query_by_hash", false, this::queryByHash);
    add(r, Method.POST, "/route", true, this::route);
    add(r, Method.POST, "/requests/{id}/prefill_complete", true, this::prefillComplete);
    add(r, Method.POST, "/requests/{id}/free", true, this::free);
    add(r, Method.POST, "/events", true, this::events);
    add(r, Method.GET, "/dump", false, this::dump);
    add(r, Method.GET, "/health", false, this::health, true);
    add(r, Method.GET, "/ready", false, this::ready, true);
    add(r, Method.GET, "/metrics", false, this::metrics, true);
    r.any(
        endpoint(
            "unmatched",
            false,
            (req, res) -> {
              throw ApiException.notFound(
                  "no endpoint "
                      + req.prologue().method().text()
                      + " "
                      + req.path().path()
                      + " (endpoints: /register, /unregister, /workers, /query, /query_by_hash,"
                      + " /route, /requests/{id}/prefill_complete, /requests/{id}/free,"
                      + " /events, /dump, /health, /ready, /metrics)");
            }));
  }

  private void add(
      HttpRouting.Builder r, Method method, String path, boolean mutating, Endpoint e) {
    add(r, method, path, mutating, e, false);
  }

  /** {@code always}: answered during a warm start too (the operations endpoints). */
  private void add(
      HttpRouting.Builder r,
      Method method,
      String path,
      boolean mutating,
      Endpoint e,
      boolean always) {
    Endpoint gated =
        always
            ? e
            : (req, res) -> {
              if (!serving.getAsBoolean()) {
                throw new ApiException(
                    503,
                    "the server is not serving yet: "
                        + ready.get().reason()
                        + " (GET /ready turns 200 when it is)");
              }
              return e.handle(req, res);
            };
    r.route(method, path, endpoint(path, mutating, gated));
    r.any(
        path,
        endpoint(
            path,
            false,
            (req, res) -> {
              res.header(HeaderNames.ALLOW, method.text());
              throw new ApiException(
                  405,
                  req.prologue().method().text()
                      + " is not allowed on "
                      + path
                      + "; use "
                      + method.text());
            }));
  }

  private Handler endpoint(String name, boolean mutating, Endpoint e) {
    return (req, res) -> {
      long t0 = System.nanoTime();
      int status;
      try {
        if (mutating
            && !auth.permits(req.headers().first(HeaderNames.AUTHORIZATION).orElse(null))) {
          res.header(HeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"kvrouter\"");
          throw new ApiException(
              401,
              "this endpoint needs the header 'Authorization: Bearer <token>' with the server's"
                  + " token (--auth-token)");
        }
        status = e.handle(req, res);
      } catch (ApiException x) {
        status = x.status();
        if (!x.connectionLost()) {
          send(res, status, JsonOut.error(x.getMessage()));
        } else {
          res.header(HeaderNames.CONNECTION, "close");
          try {
            send(res, status, JsonOut.error(x.getMessage()));
          } catch (RuntimeException gone) {
            // the client is gone: nothing to answer, nothing to log
          }
        }
      } catch (RequestException x) {
        status = x.status().code();
        if (status != 413 || res.isSent()) throw x;
        res.header(HeaderNames.CONNECTION, "close");
        send(res, 413, JsonOut.error(tooLarge()));
      } catch (RuntimeException x) {
        if (res.isSent()) throw x;
        LOG.log(System.Logger.Level.WARNING, "internal error on " + name, x);
        status = 500;
        send(res, 500, JsonOut.error("internal error: " + x));
      }
      metrics.http(name, status, System.nanoTime() - t0);
    };
  }

  /** Counts an answer Helidon gave before routing (a declared body over the limit, say). */
  void unrouted(int status) {
    metrics.http("unrouted", status, 0);
  }

  /**
   * How much of a body over the limit the server reads and drops before it answers 413, so that a
   * client still sending gets the answer rather than a reset connection (as Tomcat's
   * maxSwallowSize). Beyond the limit plus this, Helidon answers 413 at once and closes.
   */
  static final long SWALLOW_BYTES = 2L << 20;

  /** The payload limit to give Helidon for a body limit of {@code maxBodyBytes}. */
  static long helidonPayloadLimit(long maxBodyBytes) {
    return maxBodyBytes > Long.MAX_VALUE - SWALLOW_BYTES
        ? Long.MAX_VALUE
        : maxBodyBytes + SWALLOW_BYTES;
  }

  String tooLarge() {
    return "the request body is larger than the limit of "
        + maxBodyBytes
        + " bytes (--max-body-size)";
  }

  // ------------------------------------------------------------------ registration

  private record RegisterRequest(
      long instanceId,
      String endpoint,
      String replayEndpoint,
      String modelName,
      int blockSize,
      int dpRank,
      String routingGroup,
      long kvBlocks,
      String topic,
      Integer engineBlockSize) {}

  private int register(ServerRequest req, ServerResponse res) throws IOException {
    RegisterRequest r =
        JsonBody.parse(
            body(req),
            b -> {
              Long instance = null;
              String endpoint = null;
              String replay = null;
              String topic = null;
              String model = null;
              Long blockSize = null;
              Long engineBlockSize = null;
              long dpRank = 0;
              long kvBlocks = 0;
              Group group = new Group();
              while (b.nextField()) {
                switch (b.name()) {
                  case "instance_id" -> instance = b.u64();
                  case "endpoint" -> endpoint = b.optString();
                  case "replay_endpoint" -> replay = b.optString();
                  case "topic" -> topic = b.optStringOrEmpty();
                  case "model_name" -> model = b.string();
                  case "block_size" -> blockSize = b.integer(1, 1 << 20);
                  case "engine_block_size" -> engineBlockSize = b.integer(1, 1 << 20);
                  case "dp_rank" -> dpRank = b.optInteger(0, Integer.MAX_VALUE, 0);
                  case "kv_blocks" -> kvBlocks = b.optInteger(0, Long.MAX_VALUE, 0);
                  case "routing_group", "tenant_id" -> group.read(b);
                  default -> b.skip();
                }
              }
              if (endpoint == null && replay != null) {
                throw b.error("replay_endpoint", "given without endpoint");
              }
              if (endpoint == null && topic != null) {
                throw b.error("topic", "given without endpoint");
              }
              if (endpoint == null && engineBlockSize != null) {
                throw b.error(
                    "engine_block_size",
                    "given without endpoint (events posted to /events are in the index's"
                        + " block size)");
              }
              return new RegisterRequest(
                  JsonBody.require(instance, "instance_id"),
                  endpoint,
                  replay,
                  JsonBody.require(model, "model_name"),
                  JsonBody.require(blockSize, "block_size").intValue(),
                  (int) dpRank,
                  group.value,
                  kvBlocks,
                  topic,
                  engineBlockSize == null ? null : engineBlockSize.intValue());
            });
    ModelKey key = new ModelKey(r.modelName(), r.routingGroup());
    Worker w = new Worker(r.instanceId(), r.dpRank());
    ModelIndex m =
        register(
            key,
            r.blockSize(),
            w,
            r.endpoint(),
            r.replayEndpoint(),
            r.topic(),
            r.engineBlockSize() == null ? r.blockSize() : r.engineBlockSize(),
            r.kvBlocks(),
            zmqConnectTimeout);
    Registration reg = m.registrations.get(w);
    return sendJson(
        res,
        201,
        g -> {
          g.writeStartObject();
          writeRegistration(g, m, reg);
          g.writeEndObject();
        });
  }

  /**
   * Registers one rank; with an endpoint, first starts its ZMQ listener and waits up to {@code
   * connectWait} (zero: not at all) for its first connection. Nothing is registered when it fails.
   *
   * @param engineBlockSize the tokens per block of the rank's events: {@code blockSize} or a
   *     multiple of it (each engine block is split into router blocks)
   * @throws ApiException 400 for an endpoint the router cannot use or cannot connect to in time, or
   *     an engine block size that is not a multiple of {@code blockSize}; 409 as {@link
   *     Registry#register}
   */
  ModelIndex register(
      ModelKey key,
      int blockSize,
      Worker w,
      String endpoint,
      String replay,
      String topic,
      int engineBlockSize,
      long kvBlocks,
      java.time.Duration connectWait) {
    try {
      EngineEventConverter.checkBlockSizes(engineBlockSize, blockSize);
    } catch (IllegalArgumentException e) {
      throw ApiException.badRequest("engine_block_size: " + e.getMessage());
    }
    if (endpoint != null && registry.natsMode()) {
      throw ApiException.badRequest(
          "endpoint: this server takes its events from NATS (--events); a ZMQ endpoint here"
              + " would feed this replica alone. Register the rank without an endpoint and"
              + " publish its events to the stream (POST /events to any replica); nothing was"
              + " registered");
    }
    registry.precheck(key, blockSize, w);
    ZmqListener listener = null;
    if (endpoint != null) {
      listener =
          ZmqListener.start(
              w,
              endpoint,
              replay,
              topic == null ? "" : topic,
              engineBlockSize,
              blockSize,
              metrics.zmqEventsReceived());
      boolean connected;
      try {
        connected = connectWait.isZero() || listener.awaitConnected(connectWait);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        connected = false;
      }
      if (!connected) {
        listener.cancel();
        throw ApiException.badRequest(
            "endpoint: no connection to '"
                + endpoint
                + "' within "
                + connectWait.toMillis()
                + " ms (is the engine running and publishing its KV events there? vLLM: "
                + "--kv-events-config '{\"enable_kv_cache_events\": true, \"publisher\":"
                + " \"zmq\", \"endpoint\": \"tcp://*:PORT\"}'); nothing was registered");
      }
    }
    Registration reg =
        new Registration(
            w,
            endpoint,
            replay,
            endpoint == null ? null : (topic == null ? "" : topic),
            engineBlockSize,
            kvBlocks,
            listener);
    try {
      return registry.register(key, blockSize, reg);
    } catch (RuntimeException e) {
      if (listener != null) listener.cancel();
      throw e;
    }
  }

  private static void writeRegistration(JsonGenerator g, ModelIndex m, Registration reg)
      throws IOException {
    JsonOut.u64Field(g, "instance_id", reg.worker().workerId());
    g.writeNumberField("dp_rank", reg.worker().dpRank());
    g.writeStringField("model_name", m.key.modelName());
    g.writeStringField("routing_group", m.key.routingGroup());
    g.writeNumberField("block_size", m.blockSize);
    JsonOut.stringOrNull(g, "endpoint", reg.endpoint());
    JsonOut.stringOrNull(g, "replay_endpoint", reg.replayEndpoint());
    if (reg.topic() != null) g.writeStringField("topic", reg.topic());
    if (reg.endpoint() != null) g.writeNumberField("engine_block_size", reg.engineBlockSize());
    g.writeNumberField("kv_blocks", reg.kvBlocks());
    g.writeStringField("ingestion", m.nats != null ? "nats" : reg.ingestion());
  }

  /** The state and counters of a rank's ZMQ listener, for /workers. */
  private static void writeZmq(JsonGenerator g, ZmqListener l) throws IOException {
    IngestStats s = l.stats();
    g.writeObjectFieldStart("zmq");
    g.writeStringField("state", l.state());
    g.writeBooleanField("connected_once", l.connectedOnce());
    g.writeNumberField("last_sequence", l.lastSequence());
    g.writeNumberField("messages", s.messages());
    g.writeNumberField("batches", s.batches());
    g.writeNumberField("events_applied", l.applied());
    g.writeNumberField("decode_errors", s.decodeErrors());
    g.writeNumberField("bad_frames", s.badFrames());
    g.writeNumberField("duplicates", s.duplicates());
    g.writeNumberField("gaps", s.gaps());
    g.writeNumberField("lost_messages", s.lostMessages());
    g.writeNumberField("replays", s.replays());
    g.writeNumberField("replay_failures", s.replayFailures());
    g.writeNumberField("restarts", s.restarts());
    g.writeNumberField("connections", s.connections());
    g.writeNumberField("reconnects", s.reconnects());
    g.writeNumberField("disconnects", s.disconnects());
    g.writeNumberField("dropped_foreign_rank", l.droppedForeignRank());
    g.writeNumberField("dropped_unregistered", l.droppedUnregistered());
    g.writeEndObject();
  }

  private int unregister(ServerRequest req, ServerResponse res) throws IOException {
    long[] instance = {0};
    String[] model = {null};
    Group group = new Group();
    long[] dpRank = {-1};
    JsonBody.parse(
        body(req),
        b -> {
          boolean hasInstance = false;
          while (b.nextField()) {
            switch (b.name()) {
              case "instance_id" -> {
                instance[0] = b.u64();
                hasInstance = true;
              }
              case "model_name" -> model[0] = b.string();
              case "routing_group", "tenant_id" -> group.read(b);
              case "dp_rank" -> dpRank[0] = b.optInteger(0, Integer.MAX_VALUE, -1);
              default -> b.skip();
            }
          }
          JsonBody.require(hasInstance ? Boolean.TRUE : null, "instance_id");
          return JsonBody.require(model[0], "model_name");
        });
    List<Registry.Removed> removed =
        registry.unregister(model[0], group.value, instance[0], (int) dpRank[0]);
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartObject();
          g.writeArrayFieldStart("removed");
          for (Registry.Removed r : removed) {
            g.writeStartObject();
            JsonOut.u64Field(g, "instance_id", r.worker().workerId());
            g.writeNumberField("dp_rank", r.worker().dpRank());
            g.writeStringField("model_name", r.key().modelName());
            g.writeStringField("routing_group", r.key().routingGroup());
            g.writeEndObject();
          }
          g.writeEndArray();
          g.writeEndObject();
        });
  }

  private int workers(ServerRequest req, ServerResponse res) {
    String model = req.query().first("model_name").orElse(null);
    String group = req.query().first("routing_group").orElse(null);
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartArray();
          for (ModelIndex m : registry.indexes()) {
            if (model != null && !m.key.modelName().equals(model)) continue;
            if (group != null && !m.key.routingGroup().equals(group)) continue;
            List<Registration> regs = new ArrayList<>(m.registrations.values());
            for (int i = 0; i < regs.size(); ) {
              long id = regs.get(i).worker().workerId();
              int j = i;
              while (j < regs.size() && regs.get(j).worker().workerId() == id) j++;
              List<Registration> ranks = regs.subList(i, j);
              g.writeStartObject();
              JsonOut.u64Field(g, "instance_id", id);
              g.writeStringField("model_name", m.key.modelName());
              g.writeStringField("routing_group", m.key.routingGroup());
              g.writeNumberField("block_size", m.blockSize);
              g.writeObjectFieldStart("endpoints");
              for (Registration r : ranks) {
                if (r.endpoint() != null) {
                  g.writeStringField(Integer.toString(r.worker().dpRank()), r.endpoint());
                }
              }
              g.writeEndObject();
              g.writeArrayFieldStart("ranks");
              for (Registration r : ranks) {
                g.writeStartObject();
                g.writeNumberField("dp_rank", r.worker().dpRank());
                JsonOut.stringOrNull(g, "endpoint", r.endpoint());
                JsonOut.stringOrNull(g, "replay_endpoint", r.replayEndpoint());
                if (r.topic() != null) g.writeStringField("topic", r.topic());
                if (r.endpoint() != null) {
                  g.writeNumberField("engine_block_size", r.engineBlockSize());
                }
                g.writeNumberField("kv_blocks", r.kvBlocks());
                g.writeStringField("ingestion", m.nats != null ? "nats" : r.ingestion());
                if (r.listener() != null) writeZmq(g, r.listener());
                g.writeEndObject();
              }
              g.writeEndArray();
              g.writeEndObject();
              i = j;
            }
          }
          g.writeEndArray();
        });
  }

  // ------------------------------------------------------------------ queries

  /** The fields /query, /query_by_hash and /route share. */
  private static final class QueryFields {
    String requestId;
    int[] tokens;
    long[] hashes;
    String model;
    final Group group = new Group();
    String lora;
    String cacheSalt;
    Set<Long> allowed;

    ModelKey key() {
      return new ModelKey(model, group.value);
    }
  }

  private static QueryFields readQuery(byte[] body, String kind) {
    return JsonBody.parse(
        body,
        !kind.equals("hash"),
        b -> {
          QueryFields q = new QueryFields();
          while (b.nextField()) {
            switch (b.name()) {
              case "token_ids" -> {
                if (kind.equals("hash")) b.skip();
                else q.tokens = b.tokenIds();
              }
              case "block_hashes" -> {
                if (kind.equals("hash")) q.hashes = b.u64Array();
                else b.skip();
              }
              case "request_id" -> {
                if (kind.equals("route")) q.requestId = b.string();
                else b.skip();
              }
              case "allowed_instances" -> {
                if (kind.equals("route")) {
                  long[] ids = b.u64Array();
                  q.allowed = new HashSet<>();
                  for (long id : ids) q.allowed.add(id);
                } else {
                  b.skip();
                }
              }
              case "model_name" -> q.model = b.string();
              case "routing_group", "tenant_id" -> q.group.read(b);
              case "lora_name" -> q.lora = b.optString();
              case "cache_salt" -> q.cacheSalt = b.optString();
              default -> b.skip();
            }
          }
          if (kind.equals("route")) {
            JsonBody.require(q.requestId, "request_id");
            if (q.requestId.length() > MAX_REQUEST_ID) {
              throw ApiException.badRequest(
                  "request_id: longer than " + MAX_REQUEST_ID + " characters");
            }
          }
          if (kind.equals("hash")) JsonBody.require(q.hashes, "block_hashes");
          else JsonBody.require(q.tokens, "token_ids");
          JsonBody.require(q.model, "model_name");
          return q;
        });
  }

  private int query(ServerRequest req, ServerResponse res) throws IOException {
    QueryFields q = readQuery(body(req), "tokens");
    ModelIndex m = registry.require(q.key());
    OverlapScores s = m.findMatches(m.localHashes(q.tokens, q.lora, q.cacheSalt));
    return sendScores(res, m, s);
  }

  private int queryByHash(ServerRequest req, ServerResponse res) throws IOException {
    QueryFields q = readQuery(body(req), "hash");
    ModelIndex m = registry.require(q.key());
    return sendScores(res, m, m.findMatches(q.hashes));
  }

  /**
   * {@code {"scores": {"<instance>": {"<dp_rank>": tokens}}, "blocks": {...}, "tree_sizes": {...},
   * "block_size": n}}: matched tokens (blocks × block size, as Dynamo reports them), matched blocks
   * and blocks held, for every worker rank with at least one matched block.
   */
  private int sendScores(ServerResponse res, ModelIndex m, OverlapScores s) {
    final int n = s.size();
    Worker[] workers = new Worker[n];
    int[] score = new int[n];
    int[] held = new int[n];
    Integer[] order = new Integer[n];
    for (int i = 0; i < n; i++) {
      workers[i] = s.worker(i);
      score[i] = s.scoreAt(i);
      held[i] = s.blockCountAt(i);
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> workers[a].compareTo(workers[b]));
    final int bs = m.blockSize;
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartObject();
          writeNested(g, "scores", workers, order, score, bs);
          writeNested(g, "blocks", workers, order, score, 1);
          writeNested(g, "tree_sizes", workers, order, held, 1);
          g.writeNumberField("block_size", bs);
          g.writeEndObject();
        });
  }

  private static void writeNested(
      JsonGenerator g, String name, Worker[] workers, Integer[] order, int[] values, int factor)
      throws IOException {
    g.writeObjectFieldStart(name);
    long open = 0;
    boolean any = false;
    for (Integer i : order) {
      Worker w = workers[i];
      if (!any || w.workerId() != open) {
        if (any) g.writeEndObject();
        g.writeObjectFieldStart(Long.toUnsignedString(w.workerId()));
        open = w.workerId();
        any = true;
      }
      g.writeNumberField(Integer.toString(w.dpRank()), (long) values[i] * factor);
    }
    if (any) g.writeEndObject();
    g.writeEndObject();
  }

  // ------------------------------------------------------------------ routing

  private int route(ServerRequest req, ServerResponse res) throws IOException {
    QueryFields q = readQuery(body(req), "route");
    ModelIndex m = registry.require(q.key());
    RouteOptions options = new RouteOptions(q.lora, q.cacheSalt, q.allowed);
    RouteDecision d;
    try {
      d = m.router.route(q.requestId, q.tokens, options);
    } catch (IllegalArgumentException e) {
      throw ApiException.conflict(e.getMessage());
    }
    switch (d) {
      case RouteDecision.Routed r -> {
        metrics.routed(m.key, r.worker().workerId(), r.worker().dpRank());
        return sendJson(
            res,
            200,
            g -> {
              g.writeStartObject();
              g.writeStringField("request_id", q.requestId);
              JsonOut.u64Field(g, "instance_id", r.worker().workerId());
              g.writeNumberField("dp_rank", r.worker().dpRank());
              g.writeNumberField("overlap_blocks", r.overlapBlocks());
              g.writeNumberField("overlap_tokens", r.overlapTokens());
              g.writeNumberField("cost", r.cost());
              g.writeArrayFieldStart("candidates");
              for (CandidateCost c : r.candidates()) writeCandidate(g, c.candidate(), c.cost());
              g.writeEndArray();
              g.writeArrayFieldStart("busy");
              for (Worker w : r.busy()) {
                g.writeStartObject();
                JsonOut.u64Field(g, "instance_id", w.workerId());
                g.writeNumberField("dp_rank", w.dpRank());
                g.writeEndObject();
              }
              g.writeEndArray();
              g.writeEndObject();
            });
      }
      case RouteDecision.AllBusy b -> {
        metrics.routeRejected(m.key, "all_busy");
        return sendJson(
            res,
            503,
            g -> {
              g.writeStartObject();
              g.writeStringField(
                  "error",
                  "every allowed worker of " + m.key.describe() + " is busy; nothing recorded");
              g.writeArrayFieldStart("candidates");
              for (Candidate c : b.candidates()) writeCandidate(g, c, Double.NaN);
              g.writeEndArray();
              g.writeEndObject();
            });
      }
      case RouteDecision.NoWorkers n -> {
        metrics.routeRejected(m.key, "no_workers");
        throw new ApiException(
            503,
            "no registered worker of "
                + m.key.describe()
                + " is allowed by allowed_instances; nothing recorded");
      }
    }
  }

  private static void writeCandidate(JsonGenerator g, Candidate c, double cost) throws IOException {
    g.writeStartObject();
    JsonOut.u64Field(g, "instance_id", c.worker().workerId());
    g.writeNumberField("dp_rank", c.worker().dpRank());
    g.writeNumberField("overlap_blocks", c.overlapBlocks());
    g.writeNumberField("cached_blocks", c.cachedBlocks());
    g.writeNumberField("prefill_blocks", c.prefillBlocks());
    g.writeNumberField("decode_blocks", c.decodeBlocks());
    if (!Double.isNaN(cost)) g.writeNumberField("cost", cost);
    g.writeEndObject();
  }

  private int prefillComplete(ServerRequest req, ServerResponse res) {
    return requestLifecycle(req, res, true);
  }

  private int free(ServerRequest req, ServerResponse res) {
    return requestLifecycle(req, res, false);
  }

  /**
   * Marks prefill complete or frees a request in every index that has it in flight (request ids are
   * the gateway's; optional {@code model_name} and {@code routing_group} query parameters restrict
   * the search).
   */
  private int requestLifecycle(ServerRequest req, ServerResponse res, boolean prefill) {
    String id = req.path().pathParameters().get("id");
    String model = req.query().first("model_name").orElse(null);
    String group = req.query().first("routing_group").orElse(null);
    boolean found = false;
    for (ModelIndex m : registry.indexes()) {
      if (model != null && !m.key.modelName().equals(model)) continue;
      if (group != null && !m.key.routingGroup().equals(group)) continue;
      found |= prefill ? m.router.markPrefillCompleted(id) : m.router.free(id);
    }
    if (!found) {
      throw ApiException.notFound(
          "request '" + id + "' is not in flight (never routed, already freed, or expired)");
    }
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartObject();
          g.writeStringField("request_id", id);
          g.writeStringField("state", prefill ? "decoding" : "freed");
          g.writeEndObject();
        });
  }

  // ------------------------------------------------------------------ events, dump

  private int events(ServerRequest req, ServerResponse res) throws IOException {
    String model = req.query().first("model_name").orElse(null);
    String group = req.query().first("routing_group").orElse(null);
    if (model == null || model.isEmpty()) {
      metrics.eventBatchRejected("bad_request");
      throw ApiException.badRequest(
          "model_name: missing query parameter (POST /events?model_name=...&routing_group=...)");
    }
    byte[] body = body(req);
    if (body.length == 0) {
      metrics.eventBatchRejected("bad_request");
      throw ApiException.badRequest(
          "the request body is empty; expected a JSON array of Dynamo RouterEvents");
    }
    int applied = onIngestThread(() -> decodeAndApply(model, group, body));
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartObject();
          g.writeNumberField("applied", applied);
          g.writeEndObject();
        });
  }

  /** Decodes a batch, checks it and applies it whole; runs on an ingest thread. */
  private int decodeAndApply(String model, String group, byte[] body) {
    List<RouterEvent> events;
    try {
      events = RouterEventJson.readEvents(body);
    } catch (EventDecodeException e) {
      metrics.decodeError();
      metrics.eventBatchRejected("decode_error");
      throw ApiException.badRequest("events: " + e.getMessage() + "; nothing was applied");
    }
    ModelIndex m = registry.get(new ModelKey(model, group));
    if (m == null) {
      metrics.eventBatchRejected("unknown_model");
      throw ApiException.notFound(
          "unknown "
              + new ModelKey(model, group).describe()
              + ": no worker is registered for it (POST /register creates it); nothing was"
              + " applied");
    }
    try {
      if (m.nats == null) {
        m.applyEvents(events, acceptUnregistered);
      } else {
        m.checkWorkers(events, acceptUnregistered);
      }
    } catch (ApiException e) {
      metrics.eventBatchRejected(m.closed ? "unknown_model" : "unregistered_worker");
      throw e;
    }
    if (m.nats != null) {
      // every replica of the subject applies them, this one included, before the answer
      NatsEvents.publish(m.nats, events, NATS_APPLY_WAIT);
    }
    metrics.eventsReceived(events.size());
    return events.size();
  }

  /**
   * Runs {@code work} on an ingest (platform) thread and waits for it; the request's virtual thread
   * unmounts meanwhile, so a large batch does not hold one of the few carrier threads that serve
   * queries (virtual threads are not preempted; platform threads are, by the OS).
   */
  private int onIngestThread(Callable<Integer> work) {
    Future<Integer> f;
    try {
      f = ingest.submit(work);
    } catch (RejectedExecutionException e) {
      throw new ApiException(503, "the server is stopping; nothing was applied");
    }
    try {
      return f.get();
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException r) throw r;
      throw new IllegalStateException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while events were applied", e);
    }
  }

  /**
   * Every index with its block size, registrations and events: {@code {"indexes": [{model_name,
   * routing_group, block_size, workers: [registration...], events: [RouterEvent...]}]}}. Replaying
   * it (register each worker, then POST the events) into an empty server gives equal answers.
   */
  private int dump(ServerRequest req, ServerResponse res) throws IOException {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    try (OutputStream out = res.outputStream();
        JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeArrayFieldStart("indexes");
      for (ModelIndex m : registry.indexes()) {
        List<Registration> regs = new ArrayList<>(m.registrations.values());
        List<RouterEvent> events = m.router.index().dump();
        g.writeStartObject();
        g.writeStringField("model_name", m.key.modelName());
        g.writeStringField("routing_group", m.key.routingGroup());
        g.writeNumberField("block_size", m.blockSize);
        g.writeArrayFieldStart("workers");
        for (Registration r : regs) {
          g.writeStartObject();
          writeRegistration(g, m, r);
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeArrayFieldStart("events");
        for (RouterEvent e : events) g.writeRawValue(RouterEventJson.writeEvent(e));
        g.writeEndArray();
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
    }
    return 200;
  }

  // ------------------------------------------------------------------ operations

  private int health(ServerRequest req, ServerResponse res) {
    return sendJson(
        res,
        200,
        g -> {
          g.writeStartObject();
          g.writeStringField("status", "ok");
          g.writeEndObject();
        });
  }

  private int ready(ServerRequest req, ServerResponse res) {
    KvRouterServer.Readiness r = ready.get();
    return sendJson(
        res,
        r.ready() ? 200 : 503,
        g -> {
          g.writeStartObject();
          g.writeBooleanField("ready", r.ready());
          g.writeNumberField("indexes", registry.indexes().size());
          g.writeNumberField("listeners", r.listeners());
          g.writeNumberField("listeners_connecting", r.connecting());
          g.writeNumberField("listeners_given_up", r.givenUp());
          if (!r.ready()) g.writeStringField("reason", r.reason());
          g.writeEndObject();
        });
  }

  private int metrics(ServerRequest req, ServerResponse res) throws IOException {
    res.status(Status.OK_200);
    res.header(HeaderNames.CONTENT_TYPE, metrics.contentType());
    try (OutputStream out = res.outputStream()) {
      metrics.write(out);
    }
    return 200;
  }

  // ------------------------------------------------------------------ helpers

  /** {@code routing_group}, or Dynamo's {@code tenant_id} for it; both must agree. */
  private static final class Group {
    String value;

    void read(JsonBody b) throws IOException {
      String field = b.name();
      String v = b.optString();
      if (v == null) return;
      if (value != null && !value.equals(v)) {
        throw b.error(
            field,
            "routing_group and tenant_id (its Dynamo name) disagree: '"
                + value
                + "' vs '"
                + v
                + "'");
      }
      value = v;
    }
  }

  /**
   * The whole body. A Content-Type other than JSON is a 415 (none at all is taken as JSON); a body
   * that does not arrive within the read timeout is a 408, one cut short by the client a 400, both
   * on a connection that is already closed.
   */
  private byte[] body(ServerRequest req) throws IOException {
    if (!req.content().hasEntity()) return new byte[0];
    if (req.headers().contentLength().orElse(-1) > maxBodyBytes) {
      // unread: Helidon drains it (at most SWALLOW_BYTES over the limit, see helidonPayloadLimit)
      // so that the client, still sending, gets this answer instead of a reset connection
      throw new ApiException(413, tooLarge());
    }
    String type = req.headers().first(HeaderNames.CONTENT_TYPE).orElse(null);
    if (type != null && !isJson(type)) {
      // refused unread: Helidon drains the body after the answer, still under the read deadline
      throw new ApiException(
          415,
          "the request body must be JSON (Content-Type: application/json), got Content-Type: "
              + (type.length() <= 60 ? type : type.substring(0, 57) + "..."));
    }
    try {
      byte[] b = readBody(req, maxBodyBytes);
      ReadDeadline.received();
      if (b == null) throw new ApiException(413, tooLarge()); // chunked, over the limit
      return b;
    } catch (ApiException e) {
      throw e;
    } catch (RequestException e) {
      if (ReadDeadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      throw e; // a chunked body over the limit (413 in endpoint()), a malformed chunk
    } catch (RuntimeException | IOException e) {
      if (ReadDeadline.received()) {
        throw ApiException.connectionLost(
            408, "the request body did not arrive within the read timeout");
      }
      // the client closed the connection (or it broke) before sending the declared body
      throw ApiException.connectionLost(
          400, "the connection closed before the whole request body arrived: " + e);
    }
  }

  /** {@code application/json} or {@code application/*+json}, with any parameters. */
  static boolean isJson(String contentType) {
    int semi = contentType.indexOf(';');
    String t = (semi < 0 ? contentType : contentType.substring(0, semi)).trim();
    return t.equalsIgnoreCase(JSON)
        || (t.regionMatches(true, 0, "application/", 0, 12)
            && t.regionMatches(true, t.length() - 5, "+json", 0, 5));
  }

  /** The body, or null when it has no declared length and turns out longer than {@code limit}. */
  private static byte[] readBody(ServerRequest req, long limit) throws IOException {
    try (InputStream in = req.content().inputStream()) {
      long declared = req.headers().contentLength().orElse(-1);
      if (declared < 0 || declared > Integer.MAX_VALUE - 16) {
        byte[] b = in.readNBytes((int) Math.min(limit + 1, Integer.MAX_VALUE - 16));
        return b.length > limit ? null : b;
      }
      // one array of the declared size (Helidon has checked it against the limit), not chunks
      byte[] b = new byte[(int) declared];
      int n = in.readNBytes(b, 0, b.length);
      return n == b.length ? b : java.util.Arrays.copyOf(b, n);
    }
  }

  private static int sendJson(ServerResponse res, int status, JsonOut.Body body) {
    return send(res, status, JsonOut.bytes(body));
  }

  private static int send(ServerResponse res, int status, byte[] json) {
    res.status(Status.create(status));
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(json);
    return status;
  }
}
