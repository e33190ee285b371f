package io.kvrouter.gateway;

import io.kvrouter.route.EngineRole;
import io.kvrouter.transport.kvevents.ClearScope;
import java.util.Locale;

/**
 * A static engine of {@code --engine}: {@code 'http://10.0.0.5:8000;events=tcp://10.0.0.5:5557;
 * replay=tcp://10.0.0.5:5558'} and optionally {@code ;model=NAME;block_size=16;instance_id=N;
 * dp_rank=R;topic=T;role=prefill|decode|both;all_blocks_cleared=device|all_tiers}. Registered as
 * {@code POST /register} would.
 *
 * @param instanceId the instance id; -1: the gateway numbers static engines 1, 2, ... in order
 * @param model the model; null: the gateway's only {@code --model}
 * @param blockSize tokens per KV block; 0: the gateway's {@code --block-size}
 * @param role what the engine does in a disaggregated fleet ({@code both} when not given)
 * @param clearScope the tiers the engine's {@code AllBlocksCleared} empties ({@code device} when
 *     not given; {@code all_tiers} for SGLang HiCache; needs {@code events=})
 */
public record EngineSpec(
    String baseUrl,
    String model,
    int blockSize,
    long instanceId,
    int dpRank,
    String events,
    String replay,
    String topic,
    EngineRole role,
    ClearScope clearScope) {

  /** A spec whose {@code AllBlocksCleared} empties the device tier only. */
  public EngineSpec(
      String baseUrl,
      String model,
      int blockSize,
      long instanceId,
      int dpRank,
      String events,
      String replay,
      String topic,
      EngineRole role) {
    this(
        baseUrl,
        model,
        blockSize,
        instanceId,
        dpRank,
        events,
        replay,
        topic,
        role,
        ClearScope.DEVICE);
  }

  /** A spec of role {@code both}. */
  public EngineSpec(
      String baseUrl,
      String model,
      int blockSize,
      long instanceId,
      int dpRank,
      String events,
      String replay,
      String topic) {
    this(baseUrl, model, blockSize, instanceId, dpRank, events, replay, topic, EngineRole.BOTH);
  }

  /**
   * Parses the {@code --engine} syntax.
   *
   * @throws IllegalArgumentException naming the part that is wrong
   */
  public static EngineSpec parse(String spec) {
    String[] parts = spec.split(";");
    String url = parts[0].trim();
    if (!url.startsWith("http://") && !url.startsWith("https://")) {
      throw new IllegalArgumentException(
          "--engine '" + spec + "': must start with the engine's http:// base URL");
    }
    String model = null;
    int blockSize = 0;
    long id = -1;
    int rank = 0;
    String events = null;
    String replay = null;
    String topic = null;
    EngineRole role = EngineRole.BOTH;
    ClearScope clearScope = ClearScope.DEVICE;
    for (int i = 1; i < parts.length; i++) {
      String p = parts[i].trim();
      if (p.isEmpty()) continue;
      int eq = p.indexOf('=');
      if (eq < 1) {
        throw new IllegalArgumentException("--engine '" + spec + "': '" + p + "' is not key=value");
      }
      String k = p.substring(0, eq).trim().toLowerCase(Locale.ROOT);
      String v = p.substring(eq + 1).trim();
      try {
        switch (k) {
          case "events", "endpoint" -> events = v;
          case "replay", "replay_endpoint" -> replay = v;
          case "topic" -> topic = v;
          case "model", "model_name" -> model = v;
          case "block_size" -> blockSize = Integer.parseInt(v);
          case "instance_id" -> id = Long.parseUnsignedLong(v);
          case "dp_rank" -> rank = Integer.parseInt(v);
          case "role" -> {
            try {
              role = EngineRole.parse(v);
            } catch (IllegalArgumentException e) {
              throw new IllegalArgumentException(
                  "--engine '" + spec + "': role " + e.getMessage(), e);
            }
          }
          case "all_blocks_cleared" -> {
            try {
              clearScope = ClearScope.parse(v);
            } catch (IllegalArgumentException e) {
              throw new IllegalArgumentException(
                  "--engine '" + spec + "': all_blocks_cleared " + e.getMessage(), e);
            }
          }
          default ->
              throw new IllegalArgumentException(
                  "--engine '"
                      + spec
                      + "': unknown key '"
                      + k
                      + "' (keys: events, replay, topic, model, block_size, instance_id,"
                      + " dp_rank, role, all_blocks_cleared)");
        }
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--engine '" + spec + "': " + k + " must be a number, got '" + v + "'");
      }
    }
    if (replay != null && events == null) {
      throw new IllegalArgumentException("--engine '" + spec + "': replay= needs events=");
    }
    if (clearScope != ClearScope.DEVICE && events == null) {
      throw new IllegalArgumentException(
          "--engine '" + spec + "': all_blocks_cleared= needs events=");
    }
    return new EngineSpec(url, model, blockSize, id, rank, events, replay, topic, role, clearScope);
  }
}
