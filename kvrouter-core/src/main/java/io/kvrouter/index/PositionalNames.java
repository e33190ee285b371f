package io.kvrouter.index;

import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import it.unimi.dsi.fastutil.objects.ObjectOpenHashSet;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * One worker's names for its blocks in the positional index: a {@link NameTable} that stores no
 * name that is the block's own key (the router's §2 hash of its path, which is the name every
 * engine that follows §2 gives it) and finds those in the index's {@link PositionalTable} instead.
 *
 * <pre>
 * Implementation notes
 *
 * The worker names entry e by e.seq ("by key") exactly when it holds e (its id or ~id is in e's
 * holders) and e is not in unnamed. Every other name (a hash naming a block whose key differs)
 * lives in the inherited NameTable's map of other names; its own[] stays empty, since put never
 * hands it a block's own key.
 *
 * unnamed holds blocks the worker holds, or held until a moment ago, but does not name by key:
 * one held only under other names; one whose key now names another block; one whose key name was
 * just removed while the block is still held (within a Removed event every name goes before any
 * block is released, and an alias can keep the block held). released() drops a block once the
 * worker holds it no more, so for an engine that follows §2 the set is empty between events. It is
 * made on first use.
 *
 * Invariants, as NameTable's: a hash names at most one block, and a hash is never both a key name
 * and an other name. The writes keep them:
 *   put(seq, b) with seq == b.seq: the other name seq goes, if any; else a block seq names by key
 *     (another entry with this key and another local hash: a collision of the §2 hash) becomes
 *     unnamed; b leaves unnamed, and is named by key once the caller holds it.
 *   put(seq, b) with seq != b.seq: a block seq names by key becomes unnamed; seq becomes an other
 *     name; b becomes unnamed unless the worker names it by key already.
 *   remove(seq): the other name seq if there is one, else the block seq names by key, which
 *     becomes unnamed.
 * So get, put and remove answer exactly as a NameTable given the same calls would, at every call
 * from BlockIndex and ClockBound (the holders change that follows a put or a remove comes before
 * any later lookup), and size() counts the same names between events.
 *
 * Cost: a key name costs no slot at all (a NameTable's was 4.5 bytes at 1/2 to 3/4 full: 7.5 bytes
 * per (worker, block) pair on config B); finding one is a probe of the index's table, which the
 * store has just probed for the same block. Listing the names (clear, dump) scans the whole table.
 * Writer-only, like NameTable.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PositionalNames extends NameTable<PositionalEntry> {
  private final PositionalIndex index;
  private final WorkerBlocks<PositionalEntry> ws;
  private ObjectOpenHashSet<PositionalEntry> unnamed; // rare; lazily made

  PositionalNames(
      PositionalIndex index, WorkerBlocks<PositionalEntry> ws, boolean findsOtherNames) {
    super(findsOtherNames);
    this.index = index;
    this.ws = ws;
  }

  /** Whether the worker holds {@code e}, connected or detached. */
  private boolean holds(PositionalEntry e) {
    final int[] h = e.holders();
    final int id = ws.id;
    return SortedIds.contains(h, id) || SortedIds.contains(h, ~id);
  }

  /** Whether the worker names {@code e} by its key (class notes). */
  boolean namesByKey(PositionalEntry e) {
    return holds(e) && (unnamed == null || !unnamed.contains(e));
  }

  private PositionalEntry byKey(long seq) {
    return index.table().ownNamed(seq, this);
  }

  private void unname(PositionalEntry e) {
    if (unnamed == null) unnamed = new ObjectOpenHashSet<>();
    unnamed.add(e);
  }

  @Override
  PositionalEntry get(long seq) {
    final PositionalEntry other = super.get(seq);
    return other != null ? other : byKey(seq);
  }

  @Override
  PositionalEntry put(long seq, PositionalEntry node) {
    if (node.seq == seq) {
      PositionalEntry previous = super.remove(seq);
      if (previous == null) {
        previous = byKey(seq);
        if (previous != null && previous != node) unname(previous);
      }
      if (unnamed != null) unnamed.remove(node);
      return previous;
    }
    final PositionalEntry byKey = byKey(seq); // its key is seq, so it is not node
    if (byKey != null) unname(byKey);
    final boolean nodeByKey = namesByKey(node);
    final PositionalEntry other = super.put(seq, node);
    if (!nodeByKey) unname(node);
    return byKey != null ? byKey : other;
  }

  @Override
  PositionalEntry remove(long seq) {
    final PositionalEntry other = super.remove(seq);
    if (other != null) return other;
    final PositionalEntry e = byKey(seq);
    if (e != null) unname(e);
    return e;
  }

  @Override
  void released(PositionalEntry node) {
    if (unnamed != null) unnamed.remove(node);
  }

  /** The names: the other names, and one key name per held block not in unnamed. */
  @Override
  int size() {
    int n = super.size() + ws.heldBlocks;
    if (unnamed != null) {
      for (PositionalEntry e : unnamed) {
        if (holds(e)) n--;
      }
    }
    return n;
  }

  /** Names and blocks this table keeps itself: none for an engine that follows §2. For tests. */
  int keptNames() {
    return super.size() + (unnamed == null ? 0 : unnamed.size());
  }

  @Override
  void clear() {
    super.clear();
    unnamed = null;
  }

  @Override
  void addBlocksTo(List<PositionalEntry> out) {
    index.table().addOwnNamed(this, out);
    super.addBlocksTo(out);
  }

  @Override
  void addNamesTo(Object2LongOpenHashMap<PositionalEntry> out) {
    List<PositionalEntry> own = new ArrayList<>();
    index.table().addOwnNamed(this, own);
    for (PositionalEntry e : own) out.put(e, e.seq);
    super.addNamesTo(out);
  }
}
