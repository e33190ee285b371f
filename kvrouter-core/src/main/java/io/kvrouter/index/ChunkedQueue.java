package io.kvrouter.index;

import java.util.Iterator;
import java.util.NoSuchElementException;
import org.jspecify.annotations.NullUnmarked;

/**
 * A first-in first-out queue of references in fixed-size chunks: what ArrayDeque does for the
 * bound's clock queue (ClockBound), without one large array.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: a singly linked list of chunks of CHUNK (2^12) references, 16 KB each with compressed
 * references. head is the chunk polled from, at headAt; tail the chunk added to, at tailAt (its
 * next free place). A polled place is nulled at once, so the queue keeps nothing alive it no longer
 * holds. A chunk polled empty is kept as the one spare chunk when there is none, and the next
 * chunk the tail needs is the spare, so a queue that the clock hand cycles (poll, add back)
 * allocates nothing.
 *
 * Why: ArrayDeque keeps one array of the capacity, which it grows by half. On config B a bounded
 * index's queue was 550,000 references, 2.2 MB: more than half a G1 region (2 MB at -Xmx3g), so a
 * "humongous" object that took two regions of its own, 3.5 bytes per pair of heap held for nothing
 * (BENCHMARKS.md, "Issue 37: positional memory, session 16"). Chunks are never humongous, and
 * the unused part is at most one chunk at each end.
 *
 * Single-threaded: the index's writer only. Nulls are not allowed as elements (pollFirst answers
 * null when empty).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class ChunkedQueue<T> implements Iterable<T> {
  static final int CHUNK = 1 << 12;

  private static final class Chunk {
    final Object[] items = new Object[CHUNK];
    Chunk next;
  }

  private Chunk head = new Chunk();
  private int headAt;
  private Chunk tail = head;
  private int tailAt;
  private Chunk spare;
  private int size;

  int size() {
    return size;
  }

  boolean isEmpty() {
    return size == 0;
  }

  void addLast(T item) {
    if (item == null) throw new IllegalArgumentException("null element");
    if (tailAt == CHUNK) {
      Chunk c = spare;
      if (c != null) {
        spare = null;
      } else {
        c = new Chunk();
      }
      tail.next = c;
      tail = c;
      tailAt = 0;
    }
    tail.items[tailAt++] = item;
    size++;
  }

  /** The oldest element, removed; null when empty. */
  @SuppressWarnings("unchecked")
  T pollFirst() {
    if (size == 0) return null;
    if (headAt == CHUNK) {
      final Chunk done = head;
      head = done.next;
      headAt = 0;
      done.next = null;
      if (spare == null) spare = done; // its places were nulled as they were polled
    }
    final Object[] items = head.items;
    final T item = (T) items[headAt];
    items[headAt++] = null;
    size--;
    if (size == 0 && head == tail) {
      // empty: start over at the chunk's beginning, so an emptied queue holds one chunk
      headAt = 0;
      tailAt = 0;
    }
    return item;
  }

  /** The elements oldest first. The queue must not change while this is used. */
  @Override
  public Iterator<T> iterator() {
    return new Iterator<>() {
      private Chunk chunk = head;
      private int at = headAt;
      private int left = size;

      @Override
      public boolean hasNext() {
        return left > 0;
      }

      @Override
      @SuppressWarnings("unchecked")
      public T next() {
        if (left == 0) throw new NoSuchElementException();
        if (at == CHUNK) {
          chunk = chunk.next;
          at = 0;
        }
        left--;
        return (T) chunk.items[at++];
      }
    };
  }
}
