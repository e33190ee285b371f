package io.kvrouter.discovery;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;

/**
 * A sink that keeps what it was given: the engines added and not removed, a log of calls ({@code
 * "add ID"}, {@code "remove ID reason"}), and optionally removals held open (a drain in progress)
 * or adds refused.
 */
final class RecordingSink implements EngineSink {
  private final Map<String, DiscoveredEngine> engines = new ConcurrentHashMap<>();
  private final List<String> log = new CopyOnWriteArrayList<>();
  private final Map<String, CompletableFuture<Void>> held = new ConcurrentHashMap<>();
  private volatile boolean holdRemovals;
  private volatile Predicate<DiscoveredEngine> refuse = e -> false;

  @Override
  public void add(DiscoveredEngine engine) {
    if (refuse.test(engine)) {
      log.add("refused " + engine.id());
      throw new IllegalStateException("refused by the test");
    }
    DiscoveredEngine prev = engines.putIfAbsent(engine.id(), engine);
    if (prev != null) throw new AssertionError("added twice: " + engine.id());
    log.add("add " + engine.id());
  }

  @Override
  public CompletionStage<Void> remove(DiscoveredEngine engine, RemovalReason reason) {
    log.add("remove " + engine.id() + " " + reason.wireName());
    if (holdRemovals) {
      CompletableFuture<Void> f = new CompletableFuture<>();
      held.put(engine.id(), f);
      return f.thenRun(() -> engines.remove(engine.id()));
    }
    if (engines.remove(engine.id()) == null) throw new AssertionError("not added: " + engine.id());
    return CompletableFuture.completedFuture(null);
  }

  /** The engines added and not (completely) removed, by id. */
  Map<String, DiscoveredEngine> engines() {
    return new TreeMap<>(engines);
  }

  List<String> log() {
    return List.copyOf(log);
  }

  void holdRemovals(boolean hold) {
    holdRemovals = hold;
  }

  /** Whether the removal of {@code id} is held open. */
  boolean holding(String id) {
    CompletableFuture<Void> f = held.get(id);
    return f != null && !f.isDone();
  }

  /** Completes the held removal of {@code id}: the drain is over. */
  void finishRemoval(String id) {
    held.remove(id).complete(null);
  }

  void refuse(Predicate<DiscoveredEngine> p) {
    refuse = p;
  }
}
