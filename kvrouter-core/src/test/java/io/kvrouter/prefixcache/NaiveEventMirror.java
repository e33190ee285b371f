package io.kvrouter.prefixcache;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.HashMap;
import java.util.Map;

/**
 * A reference router index with no cleverness: per worker, a map from each held block's sequence
 * hash to its local hash and parent; a query scores the longest run of its own sequence hashes that
 * the worker holds, each with the query's local hash and parent (DESIGN.md §4 rule 1).
 *
 * <p>It also polices the publisher: event ids must increase per worker, a {@code Stored} parent
 * must be held, a stored block must not be held already, a removed block must be held. Each breach
 * is counted in {@link #violations} and described in {@link #firstViolation}; a correct {@link
 * PrefixCache} causes none.
 */
final class NaiveEventMirror implements EventMirror {
  private static final long NO_PARENT = 0L;

  private record Block(long localHash, boolean atRoot, long parent) {}

  private final Map<Worker, Map<Long, Block>> held = new HashMap<>();
  private final Map<Worker, Long> lastEventId = new HashMap<>();
  int violations;
  String firstViolation;
  long events;

  @Override
  public void apply(RouterEvent event) {
    events++;
    Worker w = event.worker();
    Long last = lastEventId.put(w, event.eventId());
    if (last != null && event.eventId() <= last) {
      violation("event id " + event.eventId() + " after " + last + " from " + w);
    }
    Map<Long, Block> blocks = held.computeIfAbsent(w, k -> new HashMap<>());
    switch (event.data()) {
      case CacheEvent.Stored s -> {
        if (s.hasParent() && !blocks.containsKey(s.parentHash())) {
          violation(w + " stored under a parent it does not hold: " + s);
          return;
        }
        boolean atRoot = !s.hasParent();
        long parent = s.hasParent() ? s.parentHash() : NO_PARENT;
        for (int i = 0; i < s.length(); i++) {
          Block b = new Block(s.tokensHashes()[i], atRoot, parent);
          if (blocks.put(s.blockHashes()[i], b) != null) {
            violation(w + " stored a block it already holds: " + s);
          }
          atRoot = false;
          parent = s.blockHashes()[i];
        }
      }
      case CacheEvent.Removed r -> {
        for (long h : r.blockHashes()) {
          if (blocks.remove(h) == null) {
            violation(w + " removed a block it does not hold: " + Long.toUnsignedString(h));
          }
        }
      }
      case CacheEvent.Cleared c -> blocks.clear();
    }
  }

  @Override
  public int score(Worker worker, long[] localHashes) {
    Map<Long, Block> blocks = held.getOrDefault(worker, Map.of());
    long[] seq = SequenceHasher.sequenceHashes(localHashes);
    int k = 0;
    while (k < seq.length) {
      Block b = blocks.get(seq[k]);
      boolean linked =
          b != null
              && b.localHash == localHashes[k]
              && (k == 0 ? b.atRoot : !b.atRoot && b.parent == seq[k - 1]);
      if (!linked) {
        break;
      }
      k++;
    }
    return k;
  }

  @Override
  public int blockCount(Worker worker) {
    return held.getOrDefault(worker, Map.of()).size();
  }

  private void violation(String what) {
    if (violations++ == 0) {
      firstViolation = what;
    }
  }
}
