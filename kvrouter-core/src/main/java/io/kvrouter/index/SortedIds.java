package io.kvrouter.index;

import java.util.Arrays;

/**
 * Sets of worker ids as sorted {@code int[]} arrays that are never changed once made: every change
 * returns a new array (copy-on-write), so an array a reader loaded stays valid.
 */
final class SortedIds {
  private SortedIds() {}

  /** The empty set; shared. */
  static final int[] NONE = new int[0];

  static boolean contains(int[] ids, int id) {
    return Arrays.binarySearch(ids, id) >= 0;
  }

  /** {@code ids} with {@code id} added: {@code ids} itself when it is already there. */
  static int[] with(int[] ids, int id) {
    int pos = Arrays.binarySearch(ids, id);
    if (pos >= 0) return ids;
    pos = -pos - 1;
    int[] b = new int[ids.length + 1];
    System.arraycopy(ids, 0, b, 0, pos);
    b[pos] = id;
    System.arraycopy(ids, pos, b, pos + 1, ids.length - pos);
    return b;
  }

  /**
   * {@code ids} without {@code id}: {@code ids} itself when it is not there, {@link #NONE} when
   * nothing is left.
   */
  static int[] without(int[] ids, int id) {
    int pos = Arrays.binarySearch(ids, id);
    if (pos < 0) return ids;
    if (ids.length == 1) return NONE;
    int[] b = new int[ids.length - 1];
    System.arraycopy(ids, 0, b, 0, pos);
    System.arraycopy(ids, pos + 1, b, pos, ids.length - pos - 1);
    return b;
  }
}
