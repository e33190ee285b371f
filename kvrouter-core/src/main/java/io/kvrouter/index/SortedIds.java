package io.kvrouter.index;

import java.util.Arrays;

/**
 * Sets of worker ids as sorted {@code int[]} arrays that are never changed once made: every change
 * returns a new array (copy-on-write), so an array a reader loaded stays valid. A set of one small
 * id is one shared array, so the many blocks only one worker holds share it.
 */
final class SortedIds {
  private SortedIds() {}

  /** The empty set; shared. */
  static final int[] NONE = new int[0];

  private static final int[][] SINGLE = new int[256][];

  static {
    for (int i = 0; i < SINGLE.length; i++) SINGLE[i] = new int[] {i};
  }

  private static int[] single(int id) {
    return id >= 0 && id < SINGLE.length ? SINGLE[id] : new int[] {id};
  }

  static boolean contains(int[] ids, int id) {
    return Arrays.binarySearch(ids, id) >= 0;
  }

  /** {@code ids} with {@code id} added: {@code ids} itself when it is already there. */
  static int[] with(int[] ids, int id) {
    int pos = Arrays.binarySearch(ids, id);
    if (pos >= 0) return ids;
    if (ids.length == 0) return single(id);
    pos = -pos - 1;
    int[] b = new int[ids.length + 1];
    System.arraycopy(ids, 0, b, 0, pos);
    b[pos] = id;
    System.arraycopy(ids, pos, b, pos + 1, ids.length - pos);
    return b;
  }

  /** {@code ids}, which holds {@code from} and not {@code to}, with {@code from} replaced by it. */
  static int[] replaced(int[] ids, int from, int to) {
    final int[] b = new int[ids.length];
    int j = 0;
    boolean placed = false;
    for (int x : ids) {
      if (x == from) continue;
      if (!placed && to < x) {
        b[j++] = to;
        placed = true;
      }
      b[j++] = x;
    }
    if (!placed) b[j++] = to;
    if (j != b.length) throw new IllegalStateException(from + " not in the set");
    return b.length == 1 ? single(b[0]) : b;
  }

  /**
   * {@code ids} without {@code id}: {@code ids} itself when it is not there, {@link #NONE} when
   * nothing is left.
   */
  static int[] without(int[] ids, int id) {
    int pos = Arrays.binarySearch(ids, id);
    if (pos < 0) return ids;
    if (ids.length == 1) return NONE;
    if (ids.length == 2) return single(ids[1 - pos]);
    int[] b = new int[ids.length - 1];
    System.arraycopy(ids, 0, b, 0, pos);
    System.arraycopy(ids, pos + 1, b, pos, ids.length - pos - 1);
    return b;
  }
}
