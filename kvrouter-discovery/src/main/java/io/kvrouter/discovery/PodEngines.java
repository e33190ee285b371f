package io.kvrouter.discovery;

import com.dynatrace.hash4j.hashing.Hashing;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.kvrouter.route.EngineRole;
import io.kvrouter.transport.kvevents.ClearScope;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The annotation schema: what a pod says it is ({@code kvrouter.io/*} annotations, named container
 * ports) turned into the engines it serves, or the reason it is skipped. Stateless.
 *
 * <pre>
 * Implementation notes
 *
 * Nothing is guessed: an unknown kvrouter.io/ key, a value that does not parse, a port named
 * twice with two numbers, a replay port without an events port are all reasons to skip the pod,
 * each a one-line message naming the annotation or port and the value. Readiness (notServing) is
 * separate from the schema so that a pod's annotations are checked, and reported, before it is
 * Ready. Ports: the engine's HTTP port is the container port named "http", or with an
 * InferencePool its targetPorts (several target ports: one engine per port, rank k on the k-th);
 * every rank r of a pod publishes its KV events on kv-events + r and replays on kv-replay + r,
 * vLLM's offset for data-parallel ranks.
 * </pre>
 */
final class PodEngines {
  static final String PREFIX = "kvrouter.io/";
  static final String MODEL = PREFIX + "model";
  static final String BLOCK_SIZE = PREFIX + "block-size";
  static final String ROLE = PREFIX + "role";
  static final String DP_RANKS = PREFIX + "dp-ranks";
  static final String TOPIC = PREFIX + "topic";
  static final String ALL_BLOCKS_CLEARED = PREFIX + "all-blocks-cleared";
  static final Set<String> KEYS =
      Set.of(MODEL, BLOCK_SIZE, ROLE, DP_RANKS, TOPIC, ALL_BLOCKS_CLEARED);
  static final String PORT_HTTP = "http";
  static final String PORT_EVENTS = "kv-events";
  static final String PORT_REPLAY = "kv-replay";

  /** The largest block size a registration accepts (docs/service.md). */
  static final int MAX_BLOCK_SIZE = 1_048_576;

  /** The most data-parallel ranks one pod may declare. */
  static final int MAX_RANKS = 1024;

  private static final long INSTANCE_ID_MASK = (1L << 53) - 1;

  /** The engines of a pod, or why it has none. Exactly one of the two is non-null. */
  record Result(@Nullable List<DiscoveredEngine> engines, @Nullable String invalid) {}

  private PodEngines() {}

  /** {@code namespace/name} of a pod. */
  static String key(Pod pod) {
    return pod.getMetadata().getNamespace() + "/" + pod.getMetadata().getName();
  }

  /**
   * Why a pod serves nothing, whatever its annotations: {@link RemovalReason#TERMINATING}, {@link
   * RemovalReason#NOT_READY} (no Ready=True condition, or no pod IP); null when it serves.
   */
  static @Nullable RemovalReason notServing(Pod pod) {
    if (pod.getMetadata().getDeletionTimestamp() != null) return RemovalReason.TERMINATING;
    if (pod.getStatus() == null) return RemovalReason.NOT_READY;
    String ip = pod.getStatus().getPodIP();
    if (ip == null || ip.isBlank()) return RemovalReason.NOT_READY;
    List<PodCondition> conditions = pod.getStatus().getConditions();
    if (conditions != null) {
      for (PodCondition c : conditions) {
        if ("Ready".equals(c.getType())) {
          return "True".equals(c.getStatus()) ? null : RemovalReason.NOT_READY;
        }
      }
    }
    return RemovalReason.NOT_READY;
  }

  /**
   * The engines {@code pod} serves once Ready.
   *
   * @param targetPorts the InferencePool's target ports, or null without a pool
   */
  static Result of(Pod pod, DiscoveryConfig config, @Nullable List<Integer> targetPorts) {
    try {
      return new Result(engines(pod, config, targetPorts), null);
    } catch (IllegalArgumentException e) {
      return new Result(null, Objects.requireNonNullElse(e.getMessage(), e.toString()));
    }
  }

  private static List<DiscoveredEngine> engines(
      Pod pod, DiscoveryConfig config, @Nullable List<Integer> targetPorts) {
    Map<String, String> ann =
        pod.getMetadata().getAnnotations() == null
            ? Map.of()
            : new TreeMap<>(pod.getMetadata().getAnnotations());
    for (String k : ann.keySet()) {
      if (k.startsWith(PREFIX) && !KEYS.contains(k)) {
        throw new IllegalArgumentException(
            "unknown annotation " + k + " (known: " + String.join(", ", new TreeSet<>(KEYS)) + ")");
      }
    }
    String model = ann.containsKey(MODEL) ? ann.get(MODEL).trim() : config.defaultModel();
    if (model == null) {
      throw new IllegalArgumentException(
          "no " + MODEL + " annotation and no default model configured");
    }
    if (model.isEmpty()) throw new IllegalArgumentException(MODEL + " is empty");
    int blockSize = config.defaultBlockSize();
    if (ann.containsKey(BLOCK_SIZE)) {
      blockSize = parseInt(BLOCK_SIZE, ann.get(BLOCK_SIZE));
      if (blockSize < 1 || blockSize > MAX_BLOCK_SIZE) {
        throw new IllegalArgumentException(
            BLOCK_SIZE + " must be 1.." + MAX_BLOCK_SIZE + ", got '" + ann.get(BLOCK_SIZE) + "'");
      }
    }
    EngineRole role = config.defaultRole();
    if (ann.containsKey(ROLE)) {
      try {
        role = EngineRole.parse(ann.get(ROLE).trim());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(ROLE + " " + e.getMessage(), e);
      }
    }
    ClearScope clearScope = ClearScope.DEVICE;
    if (ann.containsKey(ALL_BLOCKS_CLEARED)) {
      try {
        clearScope = ClearScope.parse(ann.get(ALL_BLOCKS_CLEARED).trim());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(ALL_BLOCKS_CLEARED + " " + e.getMessage(), e);
      }
    }
    String topic = ann.get(TOPIC);

    Map<String, Integer> ports = namedPorts(pod);
    Integer events = ports.get(PORT_EVENTS);
    Integer replay = ports.get(PORT_REPLAY);
    if (replay != null && events == null) {
      throw new IllegalArgumentException(
          "port " + PORT_REPLAY + " without a port named " + PORT_EVENTS);
    }
    if (events == null && (topic != null || clearScope != ClearScope.DEVICE)) {
      throw new IllegalArgumentException(
          (topic != null ? TOPIC : ALL_BLOCKS_CLEARED)
              + " needs a container port named "
              + PORT_EVENTS);
    }
    List<Integer> httpPorts;
    if (targetPorts != null) {
      httpPorts = targetPorts;
    } else {
      Integer http = ports.get(PORT_HTTP);
      if (http == null) {
        throw new IllegalArgumentException("no container port named " + PORT_HTTP);
      }
      httpPorts = List.of(http);
    }
    List<Integer> ranks;
    if (ann.containsKey(DP_RANKS)) {
      ranks = parseRanks(ann.get(DP_RANKS));
    } else {
      ranks = new ArrayList<>();
      for (int r = 0; r < httpPorts.size(); r++) ranks.add(r);
    }
    if (httpPorts.size() > 1 && httpPorts.size() != ranks.size()) {
      throw new IllegalArgumentException(
          "the InferencePool has "
              + httpPorts.size()
              + " target ports, one engine each, but "
              + DP_RANKS
              + " names "
              + ranks.size()
              + " ranks");
    }
    int maxRank = ranks.get(ranks.size() - 1);
    checkOffset(PORT_EVENTS, events, maxRank);
    checkOffset(PORT_REPLAY, replay, maxRank);
    if (events != null
        && replay != null
        && events <= replay + maxRank
        && replay <= events + maxRank) {
      throw new IllegalArgumentException(
          "ports "
              + PORT_EVENTS
              + " "
              + events
              + ".."
              + (events + maxRank)
              + " and "
              + PORT_REPLAY
              + " "
              + replay
              + ".."
              + (replay + maxRank)
              + " overlap (every rank r uses port + r)");
    }

    String ip = pod.getStatus() == null ? null : pod.getStatus().getPodIP();
    String host = ip == null ? "" : ip.contains(":") ? "[" + ip + "]" : ip;
    String uid = pod.getMetadata().getUid();
    String podKey = key(pod);
    long instanceId = instanceId(uid == null ? podKey : uid);
    List<DiscoveredEngine> out = new ArrayList<>(ranks.size());
    for (int i = 0; i < ranks.size(); i++) {
      int rank = ranks.get(i);
      int http = httpPorts.size() == 1 ? httpPorts.get(0) : httpPorts.get(i);
      out.add(
          new DiscoveredEngine(
              podKey + "/" + rank,
              podKey,
              uid,
              instanceId,
              rank,
              "http://" + host + ":" + http,
              model,
              blockSize,
              events == null ? null : "tcp://" + host + ":" + (events + rank),
              replay == null ? null : "tcp://" + host + ":" + (replay + rank),
              topic,
              role,
              clearScope));
    }
    return out;
  }

  /** The pod's instance id: 53 bits of XXH3-64 of its uid, never 0. */
  static long instanceId(String uid) {
    long h = Hashing.xxh3_64().hashCharsToLong(uid) & INSTANCE_ID_MASK;
    return h == 0 ? 1 : h;
  }

  private static Map<String, Integer> namedPorts(Pod pod) {
    Map<String, Integer> ports = new TreeMap<>();
    List<Container> containers =
        pod.getSpec() == null || pod.getSpec().getContainers() == null
            ? List.of()
            : pod.getSpec().getContainers();
    for (Container c : containers) {
      if (c.getPorts() == null) continue;
      for (ContainerPort p : c.getPorts()) {
        String name = p.getName();
        if (name == null || p.getContainerPort() == null) continue;
        if (!name.equals(PORT_HTTP) && !name.equals(PORT_EVENTS) && !name.equals(PORT_REPLAY)) {
          continue;
        }
        Integer prev = ports.put(name, p.getContainerPort());
        if (prev != null && !prev.equals(p.getContainerPort())) {
          throw new IllegalArgumentException(
              "port name "
                  + name
                  + " is given twice ("
                  + prev
                  + " and "
                  + p.getContainerPort()
                  + ")");
        }
      }
    }
    return ports;
  }

  private static void checkOffset(String name, @Nullable Integer port, int maxRank) {
    if (port != null && port + maxRank > 65535) {
      throw new IllegalArgumentException(
          "port " + name + " " + port + " plus rank " + maxRank + " is beyond 65535");
    }
  }

  private static int parseInt(String key, String v) {
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(key + " must be a number, got '" + v + "'");
    }
  }

  /**
   * {@code "0-3"}, {@code "0,2,5"}, {@code "4"}, or a mix: ascending, distinct ranks.
   *
   * @throws IllegalArgumentException naming the part that is wrong
   */
  static List<Integer> parseRanks(String v) {
    TreeSet<Integer> ranks = new TreeSet<>();
    for (String part : v.split(",", -1)) {
      String p = part.trim();
      int dash = p.indexOf('-');
      int lo;
      int hi;
      try {
        if (dash > 0) {
          lo = Integer.parseInt(p.substring(0, dash).trim());
          hi = Integer.parseInt(p.substring(dash + 1).trim());
        } else {
          lo = hi = Integer.parseInt(p);
        }
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            DP_RANKS + " must be ranks and ranges like '0-3' or '0,2', got '" + v + "'");
      }
      if (lo < 0 || hi < lo) {
        throw new IllegalArgumentException(
            DP_RANKS + ": '" + p + "' is not a rank or an ascending range, in '" + v + "'");
      }
      if ((long) hi - lo + 1 + ranks.size() > MAX_RANKS) {
        throw new IllegalArgumentException(
            DP_RANKS + " names more than " + MAX_RANKS + " ranks: '" + v + "'");
      }
      for (int r = lo; r <= hi; r++) {
        if (!ranks.add(r)) {
          throw new IllegalArgumentException(DP_RANKS + " names rank " + r + " twice: '" + v + "'");
        }
      }
    }
    return new ArrayList<>(ranks);
  }
}
