package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.ArrayList;
import org.jspecify.annotations.NullUnmarked;

/**
 * One worker rank's bookkeeping in a {@link CompressedTreeIndex}: the names it gave its blocks.
 *
 * <pre>
 * Implementation notes
 *
 * Writer-only except heldBlocks, which readers load (volatile int) for tie-breaks.
 * names    its canonical names (a block's own hash, RunNames).
 * others   any other name (an engine that hashes differently, a tree block first stored by such an
 *          engine): hash -> Ref(node, offset). Rare; made on first use.
 * aliases  blocks it names more than once: Ref(node, offset) with extra = names beyond the first,
 *          so removing one name keeps the block held. Rare; a list scanned linearly.
 * Refs are moved by the index when a split or merge moves their block.
 * heldBlocks counts distinct blocks held (connected or detached); detachedCount those detached.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class RunWorker extends WorkerSlot {
  final RunNames names;
  Long2ObjectOpenHashMap<Ref> others;
  ArrayList<Ref> aliases;
  volatile int heldBlocks;
  int detachedCount;
  boolean forgotten;

  RunWorker(Worker worker, int id, RunSeqs seqs) {
    super(worker, id);
    this.names = new RunNames(seqs);
  }

  boolean hasRefs() {
    return (others != null && !others.isEmpty()) || (aliases != null && !aliases.isEmpty());
  }

  /** A block as (node, offset in its run), moved by splits and merges. Writer-only. */
  static final class Ref {
    RunNode node;
    int off;
    int extra;

    Ref(RunNode node, int off) {
      this.node = node;
      this.off = off;
    }
  }
}
