package io.kvrouter.index;

import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.ints.IntArrays;
import it.unimi.dsi.fastutil.objects.Object2IntOpenCustomHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import org.jspecify.annotations.NullUnmarked;

/**
 * The distinct holder arrays of a {@link PackedBlocks}, each under a dense int id with a count of
 * the blocks that use it, so that a block record keeps a 32-bit set id beside its key instead of a
 * reference in another array.
 *
 * <pre>
 * Implementation notes
 *
 * sets[id] is the sorted holder array (SortedIds, ~id for detached workers) of set id; id 0 is
 * the empty array for good. ids maps an array's contents to its id (fastutil's content hash
 * strategy), refs[id] counts the blocks whose record names it. A set whose count drops to 0 leaves
 * ids and waits in pending; pending ids go back into use (free) only through startReuse, after the
 * index bumped its version, as for block ids (PackedPositionalIndex, "Id reuse"): a reader that
 * loaded a set id from a record and then loads sets[id] in the same walk sees the array that id
 * named when the record did, or retries. sets is published with a release store after a new id's
 * slot is filled, and the slot itself with a release store, before the record that names it.
 *
 * Config B of IndexWorkload has 25 distinct holder arrays for half a million blocks: the sets stay
 * in cache, and a reader's probe touches the record's cache line and no second per-block array.
 * Writer-only except sets (readers: acquire loads).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class HolderSets {
  static final int EMPTY = 0;
  private static final VarHandle SETS;
  private static final VarHandle SET = MethodHandles.arrayElementVarHandle(int[][].class);

  static {
    try {
      SETS = MethodHandles.lookup().findVarHandle(HolderSets.class, "sets", int[][].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through SETS
  private int[][] sets;

  private int[] refs = new int[16];
  private final Object2IntOpenCustomHashMap<int[]> ids =
      new Object2IntOpenCustomHashMap<>(IntArrays.HASH_STRATEGY);
  private int next = 1;
  private final IntArrayList free = new IntArrayList();
  private final IntArrayList pending = new IntArrayList();

  HolderSets() {
    int[][] s = new int[16][];
    s[EMPTY] = SortedIds.NONE;
    SETS.setRelease(this, s);
    ids.defaultReturnValue(-1);
  }

  /** The holder array of set {@code id} (acquire loads). Safe for lock-free readers. */
  int[] get(int id) {
    final int[][] s = (int[][]) SETS.getAcquire(this);
    // a record names a set only after its slot was filled (and the array grown), and a slot is
    // never emptied: no null, no id past the end
    return (int[]) SET.getAcquire(s, id);
  }

  /** The holder array of set {@code id}. Writer-side. */
  int[] at(int id) {
    return ((int[][]) SETS.get(this))[id];
  }

  /** The id of the set with {@code a}'s contents, made if new, with one more user. Writer-only. */
  int retain(int[] a) {
    if (a.length == 0) return EMPTY;
    int id = ids.getInt(a);
    if (id < 0) {
      id = free.isEmpty() ? next++ : free.popInt();
      int[][] s = (int[][]) SETS.get(this);
      if (id >= s.length) {
        s = Arrays.copyOf(s, s.length * 2);
        refs = Arrays.copyOf(refs, s.length);
        SET.setRelease(s, id, a);
        SETS.setRelease(this, s);
      } else {
        SET.setRelease(s, id, a);
      }
      ids.put(a, id);
    }
    refs[id]++;
    return id;
  }

  /** Set {@code id} (in use) with one more user. Writer-only. */
  int retain(int id) {
    if (id != EMPTY) refs[id]++;
    return id;
  }

  /** One user less of set {@code id}; at none, the id waits for reuse. Writer-only. */
  void release(int id) {
    if (id == EMPTY) return;
    if (--refs[id] == 0) {
      ids.removeInt(at(id));
      pending.add(id);
    }
  }

  /** Whether enough ids wait to go back into use once the caller bumps the version. */
  boolean reusable(int batch) {
    return free.isEmpty() && pending.size() >= batch;
  }

  /** Moves the waiting ids into use; the caller bumped the version first. */
  void startReuse() {
    free.addAll(pending);
    pending.clear();
  }

  /** Distinct sets in use (the empty one not counted). */
  int size() {
    return ids.size();
  }
}
