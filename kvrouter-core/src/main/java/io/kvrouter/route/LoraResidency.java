package io.kvrouter.route;

import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Which LoRA adapters each engine has resident, as the router knows it, and the {@link Scorer} (the
 * {@code lora} term of a cost of named terms) that prices a request's adapter with {@link LoraCost}
 * on each of them (docs/routing.md, "LoRA adapters"). An engine is tracked once {@link #track
 * declared} with its {@code --max-loras}; what it has resident comes from its model list ({@link
 * #replace}), from loads the caller made or saw ({@link #loaded}) and from the requests routed to
 * it ({@link #loaded} again: an engine loads a request's adapter on demand). Untracked engines cost
 * nothing: they are routed as if they served every adapter, as before LoRA placement. Thread-safe.
 *
 * <pre>
 * Implementation notes
 *
 * Data: engines, a copy-on-write Long2ObjectOpenHashMap from worker id to Engine, replaced (never
 * changed) by track and forget; readers take the volatile reference and never lock. Each Engine
 * holds its maxLoras (final) and resident, a volatile String[] in LRU order (least recently used
 * first, at most maxLoras long when maxLoras > 0, no duplicates), also replaced, never changed in
 * place. Writers (track, forget, replace, loaded, unloaded) hold this object's monitor, so two
 * updates of one engine never lose each other; the arrays are a handful of names long.
 *
 * Readers: the scorer's cost(workerId, adapter) reads the map and one array with no lock and no
 * allocation (the router calls it under its own lock, once per rank and decision, and again when
 * a decision's contributions are read); it may see an update or not, never a half-made one.
 * </pre>
 */
public final class LoraResidency {

  private static final class Engine {
    final int maxLoras; // <= 0: unknown, nothing is ever evicted
    volatile String[] resident; // LRU order, oldest first; replaced under the residency's monitor

    Engine(int maxLoras, String[] resident) {
      this.maxLoras = maxLoras;
      this.resident = resident;
    }
  }

  private static final String[] NONE = new String[0];

  private final LoraCost cost;
  private final PlacementScorer scorer = new PlacementScorer();
  private volatile Long2ObjectOpenHashMap<Engine> engines = new Long2ObjectOpenHashMap<>();

  /** An empty table whose terms price with {@code cost}. */
  public LoraResidency(LoraCost cost) {
    this.cost = Objects.requireNonNull(cost, "cost");
  }

  /** The costs this table's terms use. */
  public LoraCost cost() {
    return cost;
  }

  /**
   * Starts tracking worker {@code workerId} (with no adapter resident) or changes its {@code
   * maxLoras}, keeping what it has resident (the oldest dropped beyond a smaller bound).
   *
   * @param maxLoras the engine's {@code --max-loras}; 0 when unknown (no bound)
   * @throws IllegalArgumentException when {@code maxLoras} is negative
   */
  public synchronized void track(long workerId, int maxLoras) {
    if (maxLoras < 0) throw new IllegalArgumentException("maxLoras must be >= 0, got " + maxLoras);
    Engine old = engines.get(workerId);
    String[] resident = old == null ? NONE : old.resident;
    if (maxLoras > 0 && resident.length > maxLoras) {
      resident = Arrays.copyOfRange(resident, resident.length - maxLoras, resident.length);
    }
    Long2ObjectOpenHashMap<Engine> next = new Long2ObjectOpenHashMap<>(engines);
    next.put(workerId, new Engine(maxLoras, resident));
    engines = next;
  }

  /** Stops tracking worker {@code workerId}; returns whether it was tracked. */
  public synchronized boolean forget(long workerId) {
    if (!engines.containsKey(workerId)) return false;
    Long2ObjectOpenHashMap<Engine> next = new Long2ObjectOpenHashMap<>(engines);
    next.remove(workerId);
    engines = next;
    return true;
  }

  /** Whether worker {@code workerId} is tracked. */
  public boolean tracked(long workerId) {
    return engines.containsKey(workerId);
  }

  /** The tracked engine's {@code --max-loras} (0: unknown), or -1 when it is not tracked. */
  public int maxLoras(long workerId) {
    Engine e = engines.get(workerId);
    return e == null ? -1 : e.maxLoras;
  }

  /**
   * Sets what worker {@code workerId} has resident, as its model list says; adapters already known
   * keep their recency, new ones count as used now (in the order given). Beyond {@code maxLoras}
   * the least recently used are dropped. Does nothing for an untracked worker; returns whether it
   * is tracked.
   */
  public synchronized boolean replace(long workerId, Collection<String> adapters) {
    Engine e = engines.get(workerId);
    if (e == null) return false;
    LinkedHashSet<String> given = new LinkedHashSet<>();
    for (String a : adapters) given.add(Objects.requireNonNull(a, "adapter"));
    List<String> next = new ArrayList<>(given.size());
    for (String a : e.resident) if (given.remove(a)) next.add(a);
    next.addAll(given);
    int from = e.maxLoras > 0 ? Math.max(0, next.size() - e.maxLoras) : 0;
    e.resident = next.subList(from, next.size()).toArray(NONE);
    return true;
  }

  /**
   * Worker {@code workerId} has {@code adapter} resident and just used it (it loaded it, or a
   * request for it was routed there): it becomes the most recently used, and when that makes the
   * engine hold more than {@code maxLoras} the least recently used is evicted, as the engine's own
   * LRU does.
   *
   * @return the adapter evicted, or null (none, or the worker is not tracked)
   */
  public synchronized @Nullable String loaded(long workerId, String adapter) {
    Objects.requireNonNull(adapter, "adapter");
    Engine e = engines.get(workerId);
    if (e == null) return null;
    String[] old = e.resident;
    int at = indexOf(old, adapter);
    if (at >= 0 && at == old.length - 1) return null; // already the most recent
    String evicted = null;
    String[] next;
    if (at >= 0) {
      next = new String[old.length];
      System.arraycopy(old, 0, next, 0, at);
      System.arraycopy(old, at + 1, next, at, old.length - at - 1);
    } else if (e.maxLoras > 0 && old.length >= e.maxLoras) {
      evicted = old[0];
      next = new String[old.length];
      System.arraycopy(old, 1, next, 0, old.length - 1);
    } else {
      next = Arrays.copyOf(old, old.length + 1);
    }
    next[next.length - 1] = adapter;
    e.resident = next;
    return evicted;
  }

  /** Worker {@code workerId} unloaded {@code adapter}; returns whether it was resident. */
  public synchronized boolean unloaded(long workerId, String adapter) {
    Engine e = engines.get(workerId);
    if (e == null) return false;
    String[] old = e.resident;
    int at = indexOf(old, adapter);
    if (at < 0) return false;
    String[] next = new String[old.length - 1];
    System.arraycopy(old, 0, next, 0, at);
    System.arraycopy(old, at + 1, next, at, old.length - at - 1);
    e.resident = next;
    return true;
  }

  /** Whether worker {@code workerId} is tracked and has {@code adapter} resident. */
  public boolean isResident(long workerId, String adapter) {
    Engine e = engines.get(workerId);
    return e != null && indexOf(e.resident, adapter) >= 0;
  }

  /**
   * The adapters resident on worker {@code workerId}, least recently used first (empty when
   * untracked).
   */
  public List<String> resident(long workerId) {
    Engine e = engines.get(workerId);
    return e == null ? List.of() : List.of(e.resident);
  }

  /** The tracked workers whose resident adapters include {@code adapter}, in no order. */
  public long[] holders(String adapter) {
    Long2ObjectOpenHashMap<Engine> m = engines;
    long[] out = new long[m.size()];
    int n = 0;
    for (Long2ObjectMap.Entry<Engine> en : m.long2ObjectEntrySet()) {
      if (indexOf(en.getValue().resident, adapter) >= 0) out[n++] = en.getLongKey();
    }
    return Arrays.copyOf(out, n);
  }

  /**
   * The LoRA placement term of a cost of named terms ({@link Scorers#LORA}): for candidate {@code
   * i}, {@link #cost(long, String)} of the request's adapter ({@link RouteOptions#loraName()} of
   * {@link Candidates#options()}) on its worker, with what the worker has resident when asked;
   * nothing for a request that names no adapter. Added with {@code
   * Scorers.builder()...add(Scorers.LORA, weight, residency.scorer())} or {@link
   * WorkerSelector#withTerm}.
   */
  public Scorer scorer() {
    return scorer;
  }

  /**
   * What serving a request for {@code adapter} costs on worker {@code workerId} ({@link
   * LoraCost#cost} with what the worker has resident now); nothing on an untracked worker, nothing
   * at all when {@code adapter} is null or empty.
   */
  public double cost(long workerId, @Nullable String adapter) {
    if (adapter == null || adapter.isEmpty()) return 0.0;
    Engine e = engines.get(workerId);
    if (e == null) return 0.0;
    String[] r = e.resident;
    return cost.cost(indexOf(r, adapter) >= 0, r.length, e.maxLoras);
  }

  /** {@link #scorer()}: reads no candidate's requests column (Scorers.readsRequests). */
  final class PlacementScorer implements Scorer {
    @Override
    public double score(Candidates candidates, int i) {
      return cost(candidates.worker(i).workerId(), candidates.options().loraName());
    }

    @Override
    public String toString() {
      return "lora placement of " + LoraResidency.this;
    }
  }

  private static int indexOf(String[] a, String s) {
    for (int i = 0; i < a.length; i++) if (a[i].equals(s)) return i;
    return -1;
  }

  @Override
  public String toString() {
    return "LoraResidency[" + engines.size() + " engines, " + cost + "]";
  }
}
