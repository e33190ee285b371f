package io.kvrouter.mockengine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The mock engine's resident LoRA adapters: vLLM's {@code --enable-lora --max-loras K}, at most K
 * adapters held at once, the least recently used evicted to make room for another. An adapter
 * becomes resident when {@code POST /v1/load_lora_adapter} loads it or when a request names it
 * (loaded on demand, as vLLM does with a LoRA resolver); it leaves when unloaded or evicted.
 *
 * <pre>
 * Implementation notes
 *
 * Data: resident, an access-ordered LinkedHashMap from adapter name to its path (the load's
 * lora_path, or "on-demand"), least recently used first; loads counts every load. Written by the
 * HTTP handlers (load, unload) and the engine thread (use, at admission); read by /v1/models.
 * Every method holds this object's monitor: calls are rare and short (a handful of adapters).
 * Invariant: resident.size() <= maxLoras.
 * </pre>
 */
final class LoraSlots {
  /** The path reported for an adapter loaded by a request rather than by a load call. */
  static final String ON_DEMAND = "on-demand";

  /** What {@link #load} did. */
  enum Load {
    LOADED,
    ALREADY_LOADED
  }

  private final int maxLoras;
  private final LinkedHashMap<String, String> resident = new LinkedHashMap<>(16, 0.75f, true);
  private long loads;

  LoraSlots(int maxLoras) {
    if (maxLoras < 1) throw new IllegalArgumentException("max loras must be >= 1, got " + maxLoras);
    this.maxLoras = maxLoras;
  }

  int maxLoras() {
    return maxLoras;
  }

  /** Loads {@code name} from {@code path} unless it is resident (then nothing changes). */
  synchronized Load load(String name, String path) {
    if (resident.containsKey(name)) return Load.ALREADY_LOADED;
    makeRoom();
    resident.put(name, path);
    loads++;
    return Load.LOADED;
  }

  /**
   * A request uses {@code name}: it becomes the most recently used; returns true when it was not
   * resident and had to be loaded first (evicting the least recently used when full).
   */
  synchronized boolean use(String name) {
    if (resident.get(name) != null) return false; // get() moves it to the most recent end
    makeRoom();
    resident.put(name, ON_DEMAND);
    loads++;
    return true;
  }

  /** Unloads {@code name}; returns whether it was resident. */
  synchronized boolean unload(String name) {
    return resident.remove(name) != null;
  }

  /** The resident adapters and their paths, least recently used first. */
  synchronized List<Map.Entry<String, String>> resident() {
    List<Map.Entry<String, String>> out = new ArrayList<>(resident.size());
    for (Map.Entry<String, String> e : resident.entrySet())
      out.add(Map.entry(e.getKey(), e.getValue()));
    return out;
  }

  /** Loads so far (by load calls and on demand). */
  synchronized long loads() {
    return loads;
  }

  private void makeRoom() {
    while (resident.size() >= maxLoras) {
      String oldest = resident.keySet().iterator().next();
      resident.remove(oldest);
    }
  }
}
