package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.server.http.HttpPlumbing;
import io.kvrouter.transport.kvevents.ClearScope;
import java.io.IOException;
import java.util.HashSet;
import java.util.Set;

/**
 * The typed requests of the endpoints and the parser that reads them from request bodies: one
 * record per kind of body, every field checked, so an endpoint acts on a value that is already
 * known to be valid (docs/service.md gives the fields).
 *
 * <pre>
 * Implementation notes
 *
 * Stateless: each parse method reads one body with a JsonBody (on the request's thread) and
 * returns a record, or throws the 400 ApiException that JsonBody or a check here made. Readers
 * build their values inside the JsonBody.Reader lambda and have no side effects, since the token
 * fast path may run a reader twice (JsonBody.parse). /query, /query_by_hash and /route share one
 * reader whose Kind says which of the shared fields it reads; a field that belongs to another
 * kind is skipped unread, as an unknown field is. Checks run in the order of the old parser, so
 * the first error reported for a body is the same one.
 * </pre>
 */
final class Requests {
  private Requests() {}

  /** The longest {@code request_id} of {@code /route}. */
  static final int MAX_REQUEST_ID = 512;

  /** The longest {@code base_url}, {@code endpoint}, {@code replay_endpoint} or {@code topic}. */
  static final int MAX_ADDRESS = 2048;

  /** The longest model name or routing group. */
  static final int MAX_NAME = 256;

  /** The rule of model names and routing groups, as error messages state it. */
  static final String NAME_RULE =
      "a name is 1 to " + MAX_NAME + " characters from A-Z a-z 0-9 and . _ : / @ + -";

  /**
   * Whether {@code s} is a valid model name or routing group: 1 to {@link #MAX_NAME} characters of
   * {@code [A-Za-z0-9._:/@+-]}. That admits Hugging Face ids ({@code meta-llama/Llama-3.1-8B}),
   * Ollama tags ({@code llama3.1:8b-q4_K_M}), paths ({@code /models/x}) and provider ids ({@code
   * @cf/meta/llama-3}), and keeps out spaces, quotes, control characters and anything that is not
   * ASCII (so a name prints the same in every answer and in /metrics).
   */
  static boolean isName(String s) {
    int n = s.length();
    if (n < 1 || n > MAX_NAME) return false;
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      boolean ok =
          c >= 'a' && c <= 'z'
              || c >= 'A' && c <= 'Z'
              || c >= '0' && c <= '9'
              || c == '.'
              || c == '_'
              || c == ':'
              || c == '/'
              || c == '@'
              || c == '+'
              || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  /** {@code value}, or a 400 naming {@code field} and the rule when it is not a valid name. */
  static String name(String field, String value) {
    if (value != null && !isName(value)) {
      throw ApiException.badRequest(
          field
              + ": '"
              + HttpPlumbing.printable(value, 60)
              + "' ("
              + value.length()
              + " characters) is not a valid name: "
              + NAME_RULE);
    }
    return value;
  }

  /** The {@code model_name} and {@code routing_group} query parameters, checked as names. */
  static Filter filter(String modelName, String routingGroup) {
    return new Filter(name("model_name", modelName), name("routing_group", routingGroup));
  }

  /**
   * {@code POST /register}: one rank of one index.
   *
   * @param engineBlockSize the rank's tokens per block: the given {@code engine_block_size}, or
   *     {@code blockSize} when none was given
   * @param capacityBlocks {@code capacity_blocks} (or its former name {@code kv_blocks}); 0 when
   *     unknown
   * @param baseUrl {@code base_url}: the engine's OpenAI HTTP address for the gateway, or null
   * @param role {@code role}: what the engine does in a disaggregated fleet ({@code both} when not
   *     given)
   * @param clearScope {@code all_blocks_cleared}: the tiers the engine's {@code AllBlocksCleared}
   *     empties ({@code device} when not given)
   * @param kvSource {@code kv_source}: how the router learns what the rank caches; null when not
   *     given (the registry then decides: Registry.kvSource)
   */
  record Register(
      ModelKey key,
      int blockSize,
      Worker worker,
      String endpoint,
      String replayEndpoint,
      String topic,
      int engineBlockSize,
      long capacityBlocks,
      String baseUrl,
      EngineRole role,
      ClearScope clearScope,
      KvSource kvSource) {

    /** This registration with {@code kvSource}. */
    Register withKvSource(KvSource source) {
      return new Register(
          key,
          blockSize,
          worker,
          endpoint,
          replayEndpoint,
          topic,
          engineBlockSize,
          capacityBlocks,
          baseUrl,
          role,
          clearScope,
          source);
    }
  }

  /**
   * {@code POST /unregister}.
   *
   * @param routingGroup null: every routing group of the model
   * @param dpRank negative: every rank
   */
  record Unregister(String modelName, String routingGroup, long instanceId, int dpRank) {}

  /** {@code POST /query}: a prompt's token ids and the salts of its block hashes. */
  record Query(ModelKey key, int[] tokens, String loraName, String cacheSalt) {}

  /** {@code POST /query_by_hash}: local block hashes the caller computed. */
  record HashQuery(ModelKey key, long[] localHashes) {}

  /** {@code POST /route}: a request to place and track. */
  record Route(String requestId, ModelKey key, int[] tokens, RouteOptions options) {}

  /**
   * The optional {@code model_name} and {@code routing_group} query parameters: null matches all.
   */
  record Filter(String modelName, String routingGroup) {
    boolean matches(ModelKey key) {
      return (modelName == null || key.modelName().equals(modelName))
          && (routingGroup == null || key.routingGroup().equals(routingGroup));
    }
  }

  // ------------------------------------------------------------------ registration

  static Register register(byte[] body) {
    return JsonBody.parse(
        body,
        b -> {
          RegisterFields f = new RegisterFields();
          while (b.nextField()) f.read(b);
          return f.build(b);
        });
  }

  /**
   * {@code value} of the current field (an address or topic), or a 400 naming the field when it is
   * longer than {@link #MAX_ADDRESS}: a registration is kept as long as its rank, so its strings
   * are bounded (the value is not echoed).
   */
  private static String address(JsonBody b, String value) {
    if (value != null && value.length() > MAX_ADDRESS) {
      throw b.error(
          b.name(),
          "is " + value.length() + " characters long; at most " + MAX_ADDRESS + " are accepted");
    }
    return value;
  }

  /** The fields of a {@code POST /register} body as they are read, before they are checked. */
  private static final class RegisterFields {
    Long instance;
    String endpoint;
    String replay;
    String topic;
    String baseUrl;
    EngineRole role = EngineRole.BOTH;
    ClearScope clearScope;
    KvSource kvSource;
    String model;
    Long blockSize;
    Long engineBlockSize;
    long dpRank;
    final Capacity capacity = new Capacity();
    final Group group = new Group();

    /** Reads the field the body is at (unknown fields are skipped). */
    void read(JsonBody b) throws IOException {
      switch (b.name()) {
        case "instance_id" -> instance = b.u64();
        case "endpoint" -> endpoint = address(b, b.optString());
        case "replay_endpoint" -> replay = address(b, b.optString());
        case "topic" -> topic = address(b, b.optStringOrEmpty());
        case "base_url" -> baseUrl = address(b, b.optString());
        case "role" -> {
          String v = b.optString();
          if (v != null) {
            try {
              role = EngineRole.parse(v);
            } catch (IllegalArgumentException e) {
              throw b.error("role", e.getMessage());
            }
          }
        }
        case "all_blocks_cleared" -> {
          String v = b.optString();
          if (v != null) {
            try {
              clearScope = ClearScope.parse(v);
            } catch (IllegalArgumentException e) {
              throw b.error("all_blocks_cleared", e.getMessage());
            }
          }
        }
        case "kv_source" -> {
          String v = b.optString();
          if (v != null) {
            try {
              kvSource = KvSource.parse(v);
            } catch (IllegalArgumentException e) {
              throw b.error("kv_source", e.getMessage());
            }
          }
        }
        case "model_name" -> model = b.string();
        case "block_size" -> blockSize = b.integer(1, 1 << 20);
        case "engine_block_size" -> engineBlockSize = b.integer(1, 1 << 20);
        case "dp_rank" -> dpRank = b.optInteger(0, Integer.MAX_VALUE, 0);
        case "capacity_blocks", "kv_blocks" -> capacity.read(b);
        case "routing_group", "tenant_id" -> group.read(b);
        default -> b.skip();
      }
    }

    /** The registration, once every field is read; refuses what does not go together. */
    Register build(JsonBody b) {
      if (endpoint == null && replay != null) {
        throw b.error("replay_endpoint", "given without endpoint");
      }
      if (endpoint == null && topic != null) {
        throw b.error("topic", "given without endpoint");
      }
      if (endpoint == null && clearScope != null) {
        throw b.error(
            "all_blocks_cleared",
            "given without endpoint (events posted to /events name their tier)");
      }
      if (endpoint == null && engineBlockSize != null) {
        throw b.error(
            "engine_block_size",
            "given without endpoint (events posted to /events are in the index's block size)");
      }
      long id = JsonBody.require(instance, "instance_id");
      String modelName = name("model_name", JsonBody.require(model, "model_name"));
      int size = JsonBody.require(blockSize, "block_size").intValue();
      if (baseUrl != null) {
        String why = BaseUrls.problem(baseUrl);
        if (why != null) throw b.error("base_url", why);
      }
      return new Register(
          new ModelKey(modelName, group.value),
          size,
          new Worker(id, (int) dpRank),
          endpoint,
          replay,
          topic,
          engineBlockSize == null ? size : engineBlockSize.intValue(),
          capacity.value == null ? 0 : capacity.value,
          baseUrl == null ? null : BaseUrls.normalize(baseUrl),
          role,
          clearScope == null ? ClearScope.DEVICE : clearScope,
          kvSource);
    }
  }

  static Unregister unregister(byte[] body) {
    return JsonBody.parse(
        body,
        b -> {
          Long instance = null;
          String model = null;
          Group group = new Group();
          long dpRank = -1;
          while (b.nextField()) {
            switch (b.name()) {
              case "instance_id" -> instance = b.u64();
              case "model_name" -> model = b.string();
              case "routing_group", "tenant_id" -> group.read(b);
              case "dp_rank" -> dpRank = b.optInteger(0, Integer.MAX_VALUE, -1);
              default -> b.skip();
            }
          }
          long id = JsonBody.require(instance, "instance_id");
          return new Unregister(
              name("model_name", JsonBody.require(model, "model_name")),
              group.value,
              id,
              (int) dpRank);
        });
  }

  // ------------------------------------------------------------------ queries and routing

  static Query query(byte[] body) {
    QueryFields q = readQuery(body, Kind.QUERY);
    return new Query(q.key(), q.tokens, q.lora, q.cacheSalt);
  }

  static HashQuery queryByHash(byte[] body) {
    QueryFields q = readQuery(body, Kind.QUERY_BY_HASH);
    return new HashQuery(q.key(), q.hashes);
  }

  static Route route(byte[] body) {
    QueryFields q = readQuery(body, Kind.ROUTE);
    return new Route(
        q.requestId, q.key(), q.tokens, new RouteOptions(q.lora, q.cacheSalt, q.allowed));
  }

  /** Which of the fields /query, /query_by_hash and /route share a body reads. */
  private enum Kind {
    /** {@code token_ids} and the salts. */
    QUERY(true, false),
    /** {@code block_hashes} instead of {@code token_ids}. */
    QUERY_BY_HASH(false, false),
    /** As {@link #QUERY}, plus {@code request_id} and {@code allowed_instances}. */
    ROUTE(true, true);

    final boolean tokens;
    final boolean routing;

    Kind(boolean tokens, boolean routing) {
      this.tokens = tokens;
      this.routing = routing;
    }
  }

  /** The fields of the three kinds, filled by one reader. */
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

  /**
   * Why {@code id} cannot name a request in flight, or null: it must not start with U+0001 (the
   * mark of a peer replica's requests) and must be text a URL path can carry, so that {@code
   * /requests/{id}/free} can name it (no unpaired UTF-16 surrogate).
   */
  static String requestIdProblem(String id) {
    if (!id.isEmpty() && id.charAt(0) == '\u0001') {
      return "must not start with U+0001 (the router marks peer replicas' requests with it)";
    }
    for (int i = 0; i < id.length(); i++) {
      char c = id.charAt(i);
      if (Character.isHighSurrogate(c)
          && i + 1 < id.length()
          && Character.isLowSurrogate(id.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return "holds an unpaired UTF-16 surrogate at index " + i + ", which no URL can name";
      }
    }
    return null;
  }

  private static QueryFields readQuery(byte[] body, Kind kind) {
    return JsonBody.parse(
        body,
        kind.tokens,
        b -> {
          QueryFields q = new QueryFields();
          while (b.nextField()) {
            switch (b.name()) {
              case "token_ids" -> {
                if (kind.tokens) q.tokens = b.tokenIds();
                else b.skip();
              }
              case "block_hashes" -> {
                if (!kind.tokens) q.hashes = b.u64Array();
                else b.skip();
              }
              case "request_id" -> {
                if (kind.routing) q.requestId = b.string();
                else b.skip();
              }
              case "allowed_instances" -> {
                if (kind.routing) {
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
          if (kind.routing) {
            JsonBody.require(q.requestId, "request_id");
            if (q.requestId.length() > MAX_REQUEST_ID) {
              throw ApiException.badRequest(
                  "request_id: longer than " + MAX_REQUEST_ID + " characters");
            }
            String bad = requestIdProblem(q.requestId);
            if (bad != null) throw ApiException.badRequest("request_id: " + bad);
          }
          if (kind.tokens) JsonBody.require(q.tokens, "token_ids");
          else JsonBody.require(q.hashes, "block_hashes");
          name("model_name", JsonBody.require(q.model, "model_name"));
          return q;
        });
  }

  // ------------------------------------------------------------------ fields with two names

  /** {@code routing_group}, or Dynamo's {@code tenant_id} for it; both must agree. */
  private static final class Group {
    String value;

    void read(JsonBody b) throws IOException {
      String field = b.name();
      String v = b.optString();
      if (v == null) return;
      name(field, v);
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

  /** {@code capacity_blocks}, or {@code kv_blocks}, its former name; both must agree. */
  private static final class Capacity {
    Long value;

    void read(JsonBody b) throws IOException {
      String field = b.name();
      long v = b.optInteger(0, Long.MAX_VALUE, -1);
      if (v < 0) return; // null: not given
      if (value != null && value != v) {
        throw b.error(
            field,
            "capacity_blocks and kv_blocks (its former name) disagree: " + value + " vs " + v);
      }
      value = v;
    }
  }
}
