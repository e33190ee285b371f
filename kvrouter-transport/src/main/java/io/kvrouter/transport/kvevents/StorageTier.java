package io.kvrouter.transport.kvevents;

import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * Where an engine keeps a block: the tier an event's {@code medium} names. The router's index
 * scores {@link #DEVICE} blocks; events of other tiers describe offloaded copies and are kept apart
 * from it (see {@code docs/ingestion.md}).
 */
public enum StorageTier {
  /** Accelerator memory (GPU, or any device the engine computes on): the default. */
  DEVICE,
  /** Host memory (CPU offloading). */
  HOST,
  /** Local disk. */
  DISK,
  /** Any other medium (remote stores, names this enum does not know). */
  EXTERNAL;

  /**
   * The tier of a {@code medium} string, case-insensitively: absent, empty, {@code GPU}, {@code
   * CUDA}, {@code DEVICE}, {@code HBM}, {@code NPU}, {@code XPU}, {@code HPU}, {@code TPU} are
   * {@link #DEVICE}; {@code CPU}, {@code HOST}, {@code CPU_PINNED}, {@code PINNED}, {@code DRAM},
   * {@code LOCALCPU}, {@code LOCAL_CPU}, {@code CPU_TIER1} are {@link #HOST}; {@code DISK}, {@code
   * SSD}, {@code NVME}, {@code LOCALDISK}, {@code LOCAL_DISK}, {@code FILE}, {@code FS}, {@code
   * STORAGE}, {@code SHARED_STORAGE}, {@code CPU_TIER2} are {@link #DISK} (vLLM's offloading
   * connector names its file-system tier {@code FS} in v0.26 and {@code STORAGE} since); anything
   * else ({@code OBJ}, {@code EXTERNAL}, remote stores) is {@link #EXTERNAL}.
   */
  public static StorageTier ofMedium(@Nullable String medium) {
    if (medium == null || medium.isEmpty()) {
      return DEVICE;
    }
    return switch (medium.toUpperCase(Locale.ROOT)) {
      case "GPU", "CUDA", "DEVICE", "HBM", "NPU", "XPU", "HPU", "TPU" -> DEVICE;
      case "CPU", "HOST", "CPU_PINNED", "PINNED", "DRAM", "LOCALCPU", "LOCAL_CPU", "CPU_TIER1" ->
          HOST;
      case "DISK",
          "SSD",
          "NVME",
          "LOCALDISK",
          "LOCAL_DISK",
          "FILE",
          "FS",
          "STORAGE",
          "SHARED_STORAGE",
          "CPU_TIER2" ->
          DISK;
      default -> EXTERNAL;
    };
  }
}
