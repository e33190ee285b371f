package io.kvrouter.index;

import org.jspecify.annotations.Nullable;

/**
 * A FIFO queue of ints in fixed chunks: {@link ChunkedQueue} for the block ids of a bounded {@link
 * PackedPositionalIndex}'s clock, 4 bytes an entry instead of a reference to an object.
 *
 * <pre>
 * Implementation notes
 *
 * Chunks of CHUNK ints (16 KB: never humongous for G1) linked head to tail; the head chunk is read
 * from headAt, the tail written at tailAt; one emptied chunk is kept as a spare. Writer-only (the
 * index's writer). The unused part is at most one chunk at each end.
 * </pre>
 */
final class IntChunkedQueue {
  static final int CHUNK = 1 << 12;

  private static final class Chunk {
    final int[] items = new int[CHUNK];
    @Nullable Chunk next;
  }

  private Chunk head = new Chunk();
  private int headAt;
  private Chunk tail = head;
  private int tailAt;
  private @Nullable Chunk spare;
  private int size;

  int size() {
    return size;
  }

  boolean isEmpty() {
    return size == 0;
  }

  void addLast(int item) {
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

  /** The oldest element, removed; the queue must not be empty. */
  int pollFirst() {
    if (size == 0) throw new IllegalStateException("empty queue");
    if (headAt == CHUNK) {
      final Chunk done = head;
      final Chunk next = done.next;
      if (next == null) throw new IllegalStateException("chunks out of step");
      head = next;
      headAt = 0;
      done.next = null;
      if (spare == null) spare = done;
    }
    final int item = head.items[headAt++];
    size--;
    if (size == 0 && head == tail) {
      headAt = 0;
      tailAt = 0;
    }
    return item;
  }

  /** Empties the queue, keeping one chunk. */
  void clear() {
    head.next = null;
    tail = head;
    headAt = 0;
    tailAt = 0;
    size = 0;
  }
}
