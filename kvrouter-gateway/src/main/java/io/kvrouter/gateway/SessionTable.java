package io.kvrouter.gateway;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import com.github.benmanes.caffeine.cache.Ticker;
import io.kvrouter.event.Worker;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * The gateway's session → engine bindings (docs/gateway.md, "Sessions"): bounded in number,
 * forgotten after a TTL without a turn.
 *
 * <pre>
 * Implementation notes
 *
 * One Caffeine cache, key = model name + U+0000 + the client's session key (so that one key used
 * for two models binds each on its own), value = a Binding: the rank and the one-element allowed
 * set that hard mode routes with (built once per binding, so a hard-mode turn boxes nothing).
 * maximumSize(maxKeys) bounds it (W-TinyLFU picks the victims, not plain LRU), expireAfterAccess
 * forgets a session whose last turn (a get or a bind) is older than the TTL. Caffeine's
 * maintenance runs on the calling thread (executor Runnable::run), so eviction is synchronous with
 * the writes and a test's ticker decides expiry; reads are lock-free and never wait for a writer.
 * Size evictions are counted (evictions, and the metric the gateway gives as onEvict); expiry and
 * replacement are not evictions.
 *
 * Writers: request threads (bind after a route) and the sync's subscriber thread (remote bindings,
 * applied as local ones but not published again). Readers: request threads.
 * </pre>
 */
final class SessionTable {
  /**
   * A session's rank, with the allowed set of hard mode (the rank's worker id alone), and what
   * orders two bindings of one session made at once on two gateways: the larger (stamp, origin)
   * wins everywhere.
   */
  record Binding(Worker worker, Long id, Set<Long> only, long stamp, String origin) {
    static Binding of(Worker w, long stamp, String origin) {
      Long id = w.workerId();
      return new Binding(w, id, Set.of(id), stamp, origin);
    }

    /** Whether this binding wins over {@code other} (null: there is none). */
    boolean after(@Nullable Binding other) {
      if (other == null) return true;
      if (stamp != other.stamp) return stamp > other.stamp;
      return origin.compareTo(other.origin) > 0;
    }
  }

  private final Cache<String, Binding> cache;
  private final long maxKeys;
  private final String origin;
  private final LongAdder evictions = new LongAdder();
  private final Runnable onEvict;

  /**
   * @param origin this gateway's name in the bindings it makes
   * @param onEvict called for each session evicted for the bound (the metric)
   */
  SessionTable(long maxKeys, Duration ttl, Ticker ticker, String origin, Runnable onEvict) {
    this.maxKeys = maxKeys;
    this.origin = origin;
    this.onEvict = onEvict;
    this.cache =
        Caffeine.newBuilder()
            .maximumSize(maxKeys)
            .expireAfterAccess(ttl)
            .ticker(ticker)
            .executor(Runnable::run)
            .<String, Binding>removalListener(
                (k, v, cause) -> {
                  if (cause == RemovalCause.SIZE) {
                    evictions.increment();
                    this.onEvict.run();
                  }
                })
            .build();
  }

  /** The table key of {@code sessionKey} for {@code model}. */
  static String key(String model, String sessionKey) {
    return model + '\u0000' + sessionKey;
  }

  /** The binding of {@code key} (which counts as a turn), or null. */
  @Nullable Binding get(String key) {
    return cache.getIfPresent(key);
  }

  /** The binding of {@code key} without counting a turn (tests), or null. */
  @Nullable Binding peek(String key) {
    return cache.policy().getIfPresentQuietly(key);
  }

  /**
   * Binds {@code key} to {@code w} here, stamped {@code stamp} (a wall-clock millisecond, raised
   * past the binding it replaces); returns the new binding when it changed (null when {@code key}
   * was bound to {@code w} already, which still counts as a turn).
   */
  @Nullable Binding bind(String key, Worker w, long stamp) {
    Binding old = cache.getIfPresent(key);
    if (old != null && old.worker().equals(w)) return null;
    Binding[] made = new Binding[1];
    cache
        .asMap()
        .compute(
            key,
            (k, cur) -> {
              if (cur != null && cur.worker().equals(w)) return cur;
              long s = cur == null ? stamp : Math.max(stamp, cur.stamp() + 1);
              return made[0] = Binding.of(w, s, origin);
            });
    return made[0];
  }

  /**
   * Applies another gateway's binding of {@code key} when it wins over the one held (or there is
   * none); returns whether it was applied.
   */
  boolean bindRemote(String key, Worker w, long stamp, String from) {
    Binding b = Binding.of(w, stamp, from);
    boolean[] applied = new boolean[1];
    cache
        .asMap()
        .compute(
            key,
            (k, cur) -> {
              if (!b.after(cur)) return cur;
              applied[0] = true;
              return b;
            });
    return applied[0];
  }

  /** Forgets {@code key}. */
  void remove(String key) {
    cache.invalidate(key);
  }

  /** The sessions held now, after pending maintenance (never above {@link #maxKeys()}). */
  long size() {
    cache.cleanUp();
    return cache.estimatedSize();
  }

  /** The bound. */
  long maxKeys() {
    return maxKeys;
  }

  /** Sessions evicted for the bound since the start. */
  long evictions() {
    return evictions.sum();
  }
}
