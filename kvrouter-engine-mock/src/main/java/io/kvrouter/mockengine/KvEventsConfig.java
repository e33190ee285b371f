package io.kvrouter.mockengine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * vLLM's {@code --kv-events-config} JSON, with vLLM's field names and defaults: {@code
 * enable_kv_cache_events} (false), {@code publisher} ({@code "zmq"} when events are on; {@code
 * "null"} publishes nothing), {@code endpoint} ({@code tcp://*:5557}), {@code replay_endpoint}
 * (none), {@code topic} (""), {@code buffer_steps} (10000 batches kept for replay), {@code hwm}
 * (100000, the PUB socket's send high-water mark), {@code max_queue_size} (accepted, unused). An
 * unknown field is an error, as in vLLM's config class.
 *
 * @param enabled whether KV events are published
 * @param publisher {@code "zmq"} or {@code "null"}
 * @param endpoint the PUB socket's address; {@code *} as host binds every interface, {@code *} as
 *     port an ephemeral one
 * @param replayEndpoint the ROUTER replay socket's address, or null for none
 * @param topic the first frame of every message
 * @param bufferSteps batches kept for replay
 * @param hwm the PUB socket's send high-water mark
 */
public record KvEventsConfig(
    boolean enabled,
    String publisher,
    String endpoint,
    String replayEndpoint,
    String topic,
    int bufferSteps,
    int hwm) {

  private static final Set<String> FIELDS =
      Set.of(
          "enable_kv_cache_events",
          "publisher",
          "endpoint",
          "replay_endpoint",
          "topic",
          "buffer_steps",
          "hwm",
          "max_queue_size");

  public KvEventsConfig {
    if (!"zmq".equals(publisher) && !"null".equals(publisher)) {
      throw new IllegalArgumentException(
          "kv-events-config: publisher must be \"zmq\" or \"null\", got \"" + publisher + "\"");
    }
    if (endpoint == null || !endpoint.startsWith("tcp://")) {
      throw new IllegalArgumentException(
          "kv-events-config: endpoint must be a tcp:// address, got " + endpoint);
    }
    if (replayEndpoint != null && !replayEndpoint.startsWith("tcp://")) {
      throw new IllegalArgumentException(
          "kv-events-config: replay_endpoint must be a tcp:// address, got " + replayEndpoint);
    }
    if (bufferSteps < 1 || hwm < 0) {
      throw new IllegalArgumentException(
          "kv-events-config: buffer_steps must be >= 1 and hwm >= 0");
    }
    topic = topic == null ? "" : topic;
  }

  /** Events on, published over ZMQ on these two sockets, with vLLM's other defaults. */
  public static KvEventsConfig zmq(String endpoint, String replayEndpoint) {
    return new KvEventsConfig(true, "zmq", endpoint, replayEndpoint, "", 10_000, 100_000);
  }

  /** The same configuration with this topic. */
  public KvEventsConfig withTopic(String t) {
    return new KvEventsConfig(enabled, publisher, endpoint, replayEndpoint, t, bufferSteps, hwm);
  }

  /** Whether a ZMQ publisher runs. */
  public boolean publishes() {
    return enabled && "zmq".equals(publisher);
  }

  /**
   * Reads vLLM's JSON form.
   *
   * @throws IllegalArgumentException naming the field, on bad JSON, a wrong type or an unknown
   *     field
   */
  public static KvEventsConfig parse(String json) {
    JsonNode n;
    try {
      n = new ObjectMapper().readTree(json);
    } catch (Exception e) {
      throw new IllegalArgumentException("kv-events-config: not valid JSON: " + e.getMessage());
    }
    if (n == null || !n.isObject()) {
      throw new IllegalArgumentException("kv-events-config: expected a JSON object");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = n.properties().iterator(); it.hasNext(); ) {
      String k = it.next().getKey();
      if (!FIELDS.contains(k)) {
        throw new IllegalArgumentException(
            "kv-events-config: unknown field \"" + k + "\" (known: " + FIELDS + ")");
      }
    }
    boolean enabled = bool(n, "enable_kv_cache_events");
    String publisher = str(n, "publisher", enabled ? "zmq" : "null");
    return new KvEventsConfig(
        enabled,
        publisher,
        str(n, "endpoint", "tcp://*:5557"),
        str(n, "replay_endpoint", null),
        str(n, "topic", ""),
        integer(n, "buffer_steps", 10_000),
        integer(n, "hwm", 100_000));
  }

  private static boolean bool(JsonNode n, String k) {
    JsonNode v = n.get(k);
    if (v == null || v.isNull()) return false;
    if (!v.isBoolean()) {
      throw new IllegalArgumentException("kv-events-config: " + k + " must be true or false");
    }
    return v.booleanValue();
  }

  private static String str(JsonNode n, String k, String dflt) {
    JsonNode v = n.get(k);
    if (v == null || v.isNull()) return dflt;
    if (!v.isTextual()) {
      throw new IllegalArgumentException("kv-events-config: " + k + " must be a string");
    }
    return v.textValue();
  }

  private static int integer(JsonNode n, String k, int dflt) {
    JsonNode v = n.get(k);
    if (v == null || v.isNull()) return dflt;
    if (!v.canConvertToInt() || !v.isIntegralNumber()) {
      throw new IllegalArgumentException("kv-events-config: " + k + " must be an integer");
    }
    return v.intValue();
  }
}
